"""Run logs written straight into an `EventStore` (typed fleet records, the loop's kinds as the loop
writes them), and the report read back with the stdlib's `html.parser`: sections, their tables' cells,
every tag's attributes, the text a reader sees."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from hilbert.fleet import events as ev
from hilbert.fleet.plan import Plan, Task
from hilbert.store import EventStore

SCRIPT = '<script>alert("owned")</script>'


class Log:
    """Appends a run's events as its writers do: the harness's typed records, agents' own kinds."""

    def __init__(self, store: EventStore, run: str) -> None:
        self.store, self.run = store, run

    def harness(self, *records: ev.FleetEvent) -> None:
        for record in records:
            self.store.append(self.run, "harness", record.kind, record.data())

    def agent(self, agent: str, kind: str, **data: Any) -> None:
        self.store.append(self.run, agent, kind, data)

    def start(self, goal: str, *tasks: str) -> None:
        plan = Plan(goal=goal, tasks=tuple(Task(id=t, title=f"do {t}", verify="true") for t in tasks))
        self.harness(ev.FleetStarted(tasks=list(tasks), plan=plan.model_dump(mode="json"), workers=2))

    def attempt(self, task: str, worker: str, *, calls: list[tuple[float, dict[str, int]]]) -> None:
        """`worker` starts `task` and makes model calls, each (cost, usage)."""
        self.harness(
            ev.TaskStateChanged(task=task, status="running", worker=worker),
            ev.TaskStarted(task=task, worker=worker, worker_id=worker.lower()),
        )
        self.agent(worker, "agent_started", task=task, model="m")
        for cost, usage in calls:
            self.agent(worker, "model_call", usage=usage, cost_usd=cost, model="m", priced=True)

    def verdict(
        self,
        task: str,
        worker: str,
        round: int,
        verdict: str,
        *,
        failed: tuple[str, ...] = (),
        reasons: tuple[str, ...] = (),
        cost: float = 0.0,
        panel: str | None = None,
    ) -> None:
        commit = f"c-{task}-{round}"
        for step in failed:
            self.harness(ev.GateStep(task=task, worker=worker.lower(), commit=commit, round=round, step=step))
        self.harness(
            ev.GateVerdict(
                task=task, worker=worker.lower(), commit=commit, round=round, verdict=verdict,
                reasons=list(reasons), claimed=True, model_cost_usd=cost, panel=panel,
            )
        )  # fmt: skip

    def ended(self, task: str, worker: str, status: str, *, candidate: bool, cause: str = "",
              reason: str = "") -> None:  # fmt: skip
        self.agent(worker, "agent_stopped", status=status, cause=cause, reason=reason)
        ref = f"refs/hilbert/candidates/{task}/{worker.lower()}" if candidate else None
        self.harness(
            ev.TaskAttempted(
                task=task, worker=worker, status=status, cause=cause, reason=reason, candidate=ref
            )
        )
        if candidate:
            self.harness(ev.TaskStateChanged(task=task, status="verifying", worker=worker))

    def ref(self, task: str, worker: str) -> str:
        return f"refs/hilbert/candidates/{task}/{worker.lower()}"


@dataclass
class Section:
    text: list[str] = field(default_factory=list)
    tables: list[list[list[str]]] = field(default_factory=list)
    svgs: int = 0

    def rows(self, table: int = -1) -> list[list[str]]:
        """A table's rows of cells (its header row included)."""
        return self.tables[table]

    def column(self, name: str, table: int = -1) -> dict[str, str]:
        """first cell -> the cell under `name`, for each row of a table."""
        header, *rows = self.tables[table]
        at = header.index(name)
        return {row[0]: row[at] for row in rows}

    def pairs(self, table: int = 0) -> dict[str, str]:
        return {row[0]: row[1] for row in self.tables[table] if len(row) >= 2}


class Report(HTMLParser):
    """The report as a reader sees it, by `<section id=...>`; every start tag's attributes kept."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: dict[str, Section] = {}
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self._section: Section | None = None
        self._cell: list[str] | None = None
        self._style = False
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        section = self._section
        if tag == "section":
            self._section = self.sections.setdefault(str(dict(attrs).get("id")), Section())
        elif tag in ("style",):
            self._style = True
        elif section is not None and tag == "table":
            section.tables.append([])
        elif section is not None and tag == "tr":
            section.tables[-1].append([])
        elif section is not None and tag in ("td", "th"):
            self._cell = []
        elif section is not None and tag == "svg":
            section.svgs += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self._section = None
        elif tag == "style":
            self._style = False
        elif tag in ("td", "th") and self._cell is not None and self._section is not None:
            self._section.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._style:
            return
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)
        if self._section is not None:
            self._section.text.append(data)

    def external_references(self) -> list[str]:
        """Every attribute that would make a reader's client fetch something from elsewhere."""
        found = []
        for tag, attrs in self.tags:
            for name, value in attrs.items():
                fetches = name in ("src", "href", "xlink:href", "action", "srcset", "data", "poster")
                if fetches and value and not value.startswith("#"):
                    found.append(f"<{tag} {name}={value}>")
                if name == "style" and value and "url(" in value:
                    found.append(f"<{tag} style={value}>")
        return found
