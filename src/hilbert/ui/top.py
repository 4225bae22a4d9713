"""`hilbert top`: a live terminal UI over one run (Textual), running or finished.

Every second it catches up with the events committed since its last look (its own `Fold`, as
`status --watch` keeps one) and shows: the agents table (`hilbert.ui.top_view.agent_rows`), the
selected agent's transcript (its events as `hilbert log` renders them), the stop gate's verdicts and
send-backs, messages and stop requests, proposals, budgets, and the rate-limit governor's state — a
panel the log has nothing for says so, it never shows a made-up value. Its keys do what the commands
do, through the same functions (`hilbert.ui.fleet_actions`, `ask_command`): a key records exactly the
events its command records. What must not live here: shaping the data (`top_view`), a fold of its own.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Input, Label, RichLog, Static

from hilbert.errors import HilbertError
from hilbert.fleet.inbox import MESSAGE_KINDS, STOP_REQUESTED
from hilbert.fleet.proposals import Proposal, proposals
from hilbert.fleet.state import Fold
from hilbert.settings import Settings
from hilbert.store import EventStore
from hilbert.ui.fleet_actions import approve_proposal, send_message, stop_agents
from hilbert.ui.fleet_commands import ask_command
from hilbert.ui.log_view import format_event
from hilbert.ui.top_view import (
    agent_rows,
    budget_lines,
    governor_lines,
    proposal_lines,
    run_line,
    verdict_lines,
)
from hilbert.views.governor import for_run

COLUMNS = ("name", "task", "state", "turns", "tokens", "cost", "last event")
MESSAGE_LOG_KINDS = (*MESSAGE_KINDS, STOP_REQUESTED, "message_rejected", "message_refused")
MESSAGES_SHOWN = 200  # the newest messages kept in their panel
EMPTY = {
    "verdicts": "(no verdict yet: no attempt has reached the stop gate)",
    "messages": "(no message yet)",
    "proposals": "(no proposal: nothing waits for your approval)",
    "budgets": "(no budget in this run's log)",
    "governor": "(no call of this run's models went through this machine's rate-limit governor)",
}
TITLES = {
    "verdicts": "gate verdicts & send-backs",
    "messages": "messages",
    "proposals": "proposals",
    "budgets": "budgets",
    "governor": "governor",
}


class Ask(ModalScreen[str | None]):
    """One line of text from the person: enter gives it, escape gives None."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, prompt: str, value: str = "") -> None:
        super().__init__()
        self.prompt, self.value = prompt, value

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(Text(self.prompt))
            yield Input(value=self.value, id="answer-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class Confirm(ModalScreen[bool]):
    """A yes/no question: y confirms, n or escape does not."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes"),
        Binding("n,escape", "answer(False)", "no"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(Text(f"{self.question}  [y/n]"))

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class TopApp(App[None]):
    """The live view of run `run` in `store`; `settings` name the model that answers `ask`."""

    TITLE = "hilbert top"
    CSS = """
    #run { height: 1; background: $boost; }
    #agents { height: auto; max-height: 40%; }
    #transcript { width: 3fr; border: round $accent; }
    #side { width: 2fr; }
    .panel { border: round $secondary; padding: 0 1; }
    #notice { height: auto; max-height: 4; background: $boost; }
    .dialog { width: 80%; height: auto; border: thick $accent; background: $surface; padding: 1 2; }
    Ask, Confirm { align: center middle; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "ask", "ask"),
        Binding("s", "send", "send"),
        Binding("x", "stop_agent", "stop agent"),
        Binding("X", "stop_run", "stop run"),
        Binding("p", "approve", "approve"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(
        self,
        store: EventStore,
        run: str,
        settings: Settings,
        *,
        poll_s: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.store, self.run_id, self.settings = store, run, settings
        self.poll_s, self.clock = poll_s, clock
        self.fold = Fold(store, run)
        self.selected: str | None = None
        self.transcript_after = 0  # the last event of the selected agent shown in its transcript
        self.messages_after = 0
        self.messages: deque[str] = deque(maxlen=MESSAGES_SHOWN)
        self.proposals: list[Proposal] = []

    def compose(self) -> ComposeResult:
        # kept, not queried, so that a poll that fires while the app closes finds its widgets
        self.texts = {name: Static(id=name, markup=False) for name in ("run", "notice")}
        self.texts |= {name: Static(id=name, classes="panel", markup=False) for name in ("answer", *TITLES)}
        self.table: DataTable[Text] = DataTable(id="agents", cursor_type="row", zebra_stripes=True)
        self.transcript = RichLog(id="transcript", wrap=True, markup=False, max_lines=5000)
        yield self.texts["run"]
        yield self.table
        with Horizontal():
            yield self.transcript
            with VerticalScroll(id="side"):
                yield self.texts["answer"]
                for panel in TITLES:
                    yield self.texts[panel]
        yield self.texts["notice"]
        yield Footer()

    def on_mount(self) -> None:
        for column in COLUMNS:
            self.table.add_column(column, key=column)
        for panel, title in TITLES.items():
            self.texts[panel].border_title = title
        self.texts["answer"].border_title, self.texts["answer"].display = "answer", False
        self.transcript.border_title = "transcript (select an agent)"
        self.refresh_view()
        self.set_interval(self.poll_s, self.refresh_view)

    # -- reading the log ----------------------------------------------------------------------------

    def refresh_view(self) -> None:
        """Catch up with the log: the run's line, the table, the panels, the selected transcript."""
        state = self.fold.catch_up()
        self.texts["run"].update(run_line(state))
        table = self.table
        for row in agent_rows(state, self.clock()):
            cells = [
                row.name,
                row.task,
                row.state,
                str(row.turns),
                f"{row.tokens:,}",
                row.cost,
                row.last_event,
            ]
            if row.name in table.rows:
                for column, cell in zip(COLUMNS, cells, strict=True):
                    table.update_cell(row.name, column, Text(cell), update_width=True)
            else:
                table.add_row(*(Text(cell) for cell in cells), key=row.name)
        if self.selected is None and table.row_count:
            self.select(str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value))
        for event in self.store.events(
            run=self.run_id, kinds=MESSAGE_LOG_KINDS, after_id=self.messages_after
        ):
            self.messages.append(format_event(event, self.store))
            self.messages_after = event.id
        self.proposals = proposals(self.store, self.run_id)
        self._panel("verdicts", verdict_lines(state))
        self._panel("messages", list(self.messages))
        self._panel("proposals", proposal_lines(self.proposals))
        self._panel("budgets", budget_lines(state))
        now = time.time()
        self._panel("governor", governor_lines(for_run(state, self.settings, now), now))
        self._follow_transcript()

    def _panel(self, panel: str, lines: list[str]) -> None:
        self.texts[panel].update("\n".join(lines) or EMPTY[panel])

    def select(self, agent: str) -> None:
        """Show `agent`'s transcript from its first event."""
        if agent == self.selected:
            return
        self.selected, self.transcript_after = agent, 0
        transcript = self.transcript
        transcript.clear()
        transcript.border_title = Text(f"transcript: {agent}")
        self._follow_transcript()

    def _follow_transcript(self) -> None:
        if self.selected is None:
            return
        transcript = self.transcript
        while batch := self.store.events(
            run=self.run_id, agent=self.selected, after_id=self.transcript_after, limit=1000
        ):
            for event in batch:
                transcript.write(Text(format_event(event, self.store)))
            self.transcript_after = batch[-1].id

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.select(str(event.row_key.value))

    # -- the person's keys: each the command of the same name ---------------------------------------

    def say(self, line: str) -> None:
        self.texts["notice"].update(line)

    def _do(self, action: Callable[[], str]) -> None:
        try:
            self.say(action())
        except HilbertError as error:
            self.say(f"error: {self.store.redactor.redact(str(error))}")
        self.refresh_view()

    def action_send(self) -> None:
        agent = self.selected
        if agent is None:
            self.say("no agent selected")
            return

        def sent(text: str | None) -> None:
            if text:
                self._do(lambda: send_message(self.store, self.run_id, agent, text))

        self.push_screen(Ask(f"message to {agent} (enter sends, escape cancels):"), sent)

    def action_stop_agent(self) -> None:
        agent = self.selected
        if agent is None:
            self.say("no agent selected")
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._do(lambda: stop_agents(self.store, self.run_id, agent))

        self.push_screen(Confirm(f"stop {agent}? (its work is kept)"), confirmed)

    def action_stop_run(self) -> None:
        def confirmed(yes: bool | None) -> None:
            if yes:
                self._do(lambda: stop_agents(self.store, self.run_id, None))

        self.push_screen(Confirm(f"stop the whole run {self.run_id}? (every agent; work is kept)"), confirmed)

    def action_approve(self) -> None:
        """A budget's question (its work waits) first, then the proposals: what `hilbert approve` takes."""
        waiting = [q.asked.id for q in self.fold.catch_up().spend.waiting()]
        waiting += [p.id for p in self.proposals if p.status == "pending"]
        if not waiting:
            self.say("nothing waits for your approval")
            return

        def chosen(proposal: str | None) -> None:
            if proposal:
                self._do(lambda: approve_proposal(self.store, self.run_id, proposal))

        self.push_screen(Ask(f"approve which? waiting: {', '.join(waiting)}", waiting[0]), chosen)

    def action_ask(self) -> None:
        agent = self.selected
        if agent is None:
            self.say("no agent selected")
            return

        def asked(question: str | None) -> None:
            if question:
                self.say(f"asking about {agent} …")
                self.run_worker(self._answer(agent, question), exclusive=True, group="ask")

        self.push_screen(Ask(f"ask about {agent}:", "How is it going?"), asked)

    async def _answer(self, agent: str, question: str) -> None:
        panel = self.texts["answer"]
        try:
            reply = await ask_command(self.settings, self.store, self.run_id, agent, question)
        except HilbertError as error:
            self.say(f"error: {self.store.redactor.redact(str(error))}")
            return
        panel.border_title, panel.display = Text(f"{agent}: {question}"), True  # text, not markup
        panel.update(self.store.redactor.redact(reply))
        self.say(f"answered: {question}")
