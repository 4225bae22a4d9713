"""The readable log: events turned into short lines for a person (`hilbert log [--follow]`).

`format_event` renders one event as one line (time, agent, what happened) plus, where it helps, a few
indented lines (the first lines of a reply, of a tool's output, a claim). `print_log` prints a run's
log, and with `follow` keeps printing what any process appends. Numbers shown here come from the
events alone; anything another view also needs (totals, status) lives in `hilbert.store.summary`.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from hilbert.store import Event, EventStore
from hilbert.store.kinds import (
    AGENT_STARTED,
    AGENT_STOPPED,
    MESSAGE_INJECTED,
    MODEL_CALL,
    MODEL_ERROR,
    POLICY_ACTION,
    TOOL_RESULT,
)

AGENT_WIDTH = 12  # agent names are padded to this many characters so the columns line up
MAX_WIDTH = 160  # characters of one shown line of text before it is cut with "…"
OUTPUT_LINES = 3  # lines of a tool's output (or a reply's text) shown under its line

# Where tool arguments have one obvious subject, show it instead of the JSON (first match wins).
_SUBJECT_KEYS = ("command", "cmd", "path", "file", "pattern", "query", "url")
# A line of a tool's output that gives the exit code: "[exit 1]" (hilbert's shell), "exit code: 1", …
_EXIT_LINE = re.compile(
    r"^\s*\[?(?:exit(?:[ _]code)?|exit status|return ?code)\s*[:=]?\s*(-?\d+)\]?\s*$", re.I
)


def format_event(event: Event, store: EventStore) -> str:
    """One event as a line ("12:03:04 alice        model call 3: …"), plus indented detail lines."""
    render = _RENDERERS.get(event.kind, _render_other)
    try:
        head, details = render(event, store)
    except (KeyError, TypeError, ValueError, AttributeError):  # a writer we do not understand
        head, details = _render_other(event, store)
    prefix = f"{_clock(event.time)} {event.agent:<{AGENT_WIDTH}} "
    indent = " " * (len(prefix) + 2)
    return "\n".join([prefix + head, *(indent + _cut(line) for line in details)])


def print_log(
    store: EventStore,
    *,
    run: str | None = None,
    agent: str | None = None,
    follow: bool = False,
    out: TextIO | None = None,
    until: Callable[[Event], bool] | None = None,
    poll_s: float = 0.2,
) -> None:
    """Print the log of `run` (all runs, each under a header, when None), optionally of one agent.
    With `follow`, keep printing new events as they are committed until `until(event)` is true or
    the person presses Ctrl-C. Runs its own event loop when following: call it from the CLI edge,
    not from inside a running loop. `out` defaults to the current `sys.stdout`."""
    stream = sys.stdout if out is None else out
    shown_run: list[str] = []

    def show(event: Event) -> None:
        if run is None and shown_run[-1:] != [event.run]:
            print(f"── run {event.run} ──", file=stream)
            shown_run.append(event.run)
        print(format_event(event, store), file=stream, flush=True)

    last = 0
    while batch := store.events(run=run, agent=agent, after_id=last, limit=1000):
        for event in batch:
            show(event)
            last = event.id
            if until is not None and until(event):
                return
    if not follow:
        return

    async def tail() -> None:
        async for event in store.follow(run=run, agent=agent, after_id=last, until=until, poll_s=poll_s):
            show(event)

    try:
        asyncio.run(tail())
    except KeyboardInterrupt:
        return


# -- one renderer per kind: (headline, detail lines) ---------------------------------------------

Rendered = tuple[str, list[str]]


def _render_started(event: Event, store: EventStore) -> Rendered:
    data = event.data
    tools = list(data.get("tools", ()))
    head = f"started: {data['model']}, {_plural(len(tools), 'tool')}"
    if tools:
        head += f" ({', '.join(tools)})"
    if data.get("workspace"):
        head += f" in {data['workspace']}"
    return head, [f"task: {_first_line(str(data.get('task', '')))}"]


def _render_model_call(event: Event, store: EventStore) -> Rendered:
    data = event.data
    number = store.count(run=event.run, agent=event.agent, kind=MODEL_CALL, upto_id=event.id)
    reply = store.get_messages([data["response"]])[0]
    if reply.tool_calls:
        names = ", ".join(call.name for call in reply.tool_calls)
        outcome = f"{_plural(len(reply.tool_calls), 'tool call')} ({names})"
    else:
        outcome = (
            "reply" if data.get("stop_reason") in (None, "end_turn") else f"reply ({data['stop_reason']})"
        )
    parts = [_tokens(data.get("usage") or {}), f"${float(data.get('cost_usd', 0.0)):.4f}"]
    parts.append(f"{float(data.get('latency_s', 0.0)):.1f}s")
    if int(data.get("attempts", 1)) > 1:
        parts.append(f"{data['attempts']} attempts")
    return f"model call {number}: {', '.join(parts)} → {outcome}", _excerpt(reply.content, 2)


def _render_model_error(event: Event, store: EventStore) -> Rendered:
    return f"model error: {event.data['error']}: {_first_line(str(event.data.get('message', '')))}", []


def _render_tool_result(event: Event, store: EventStore) -> Rendered:
    data = event.data
    arguments: dict[str, Any] = data.get("arguments") or {}
    result = store.get_messages([data["message"]])[0]
    output = result.content.splitlines()
    exit_code = data.get("exit_code", _exit_code(output))
    if exit_code is not None:
        outcome = f"exit {exit_code}"
        output = [line for line in output if not _EXIT_LINE.match(line)]
    else:
        outcome = "error" if data.get("is_error") else "ok"
    head = f"{data['name']} {_subject(arguments)}".rstrip()
    head += f" → {outcome} ({float(data.get('duration_s', 0.0)):.1f}s)"
    return head, _excerpt("\n".join(output), OUTPUT_LINES)


def _render_injected(event: Event, store: EventStore) -> Rendered:
    message = store.get_messages([event.data["message"]])[0]
    lines = _excerpt(message.content, OUTPUT_LINES + 1)
    head = f"{event.data.get('by', '?')} added a {message.role} message"
    return (f"{head}: {lines[0]}", lines[1:]) if lines else (head, [])


def _render_stopped(event: Event, store: EventStore) -> Rendered:
    data = event.data
    head = f"stopped ({data['status']}) after {_plural(int(data.get('turns', 0)), 'turn')}"
    if data.get("usage"):
        head += f", {_tokens(data['usage'])}"
    head += f", ${float(data.get('cost_usd', 0.0)):.4f}"
    details = [
        f"{key}: {_first_line(str(data[key]))}" for key in ("claim", "evidence", "reason") if data.get(key)
    ]
    return head, details


def _render_policy_action(event: Event, store: EventStore) -> Rendered:
    data = event.data
    reason = f": {_first_line(str(data['reason']))}" if data.get("reason") else ""
    return f"{data['policy']} → {data['action']} (at {data.get('moment', '?')}){reason}", []


# The fleet's harness events (`hilbert.fleet`), one line each; long outputs are shown as an excerpt.
_FLEET_LINES = {
    "fleet_started": "fleet started: {n_tasks} tasks, {workers} workers on {model}",
    "task_started": "{task} started by {worker} at {base:.10}",
    "task_state": "{task} → {status_words}{by}",
    "task_attempted": "{task}: attempt ended {status}{candidate_note}",
    "task_retried": "{task} retried: {why_line}",
    "task_escalated": "{task} escalated{together}: {why_line}",
    "gate_step": "gate {task} by {worker}, round {round}: {step} {verdict} — {summary_line}",
    "gate_running": "gate {task} by {worker}, round {round}: {step} still running ({elapsed_s} s)",
    "gate_verdict": "gate {task} by {worker}, round {round}: {gate_word}{reasons_line}",
    "panel_reviewed": "review panel on {task} by {worker}, round {round}: {summary}",
    "panel_skipped": "review panel skipped for {task}: {why}",
    "panel_agreement": "review panel over {reviews} reviews: {pairs_line}",
    "worker_nudged": "nudged {to}: {text_line}",
    "worker_stuck": "{worker} on {task} is stuck: no progress for {quiet_s} s",
    "worker_hung": "{worker} on {task} hung: no heartbeat for {quiet_s} s; restarting it",
    "liveness_error": "the liveness watch failed one look: {error}",
    "worker_restarted": "{worker} restarted on {task} from its workspace and {kept} logged messages ({why})",
    "workspace_closed": "{message}",
    "merge_batch_started": "merge batch {task_list} on {base:.10}",
    "merge_checks_passed": "merge checks passed for {task_list}",
    "merge_checks_failed": "merge checks failed for {task_list}: `{command}` exit {exit}{newly}",
    "merge_checks_baseline": "no new test failures vs the tip ({n_failing} still failing, {n_fixed} fixed)",
    "merged": "merged {task} at {commit:.10}",
    "merge_rejected": "{task} rejected by `{command}` (exit {exit}){together}{newly}",
    "merge_conflict": "{task} conflicts with the integration branch",
    "merge_requeued": "{task_list} requeued: {reason}",
    "merge_bisect": "bisecting: checking {testing_list} of {suspects_list}",
    "flaky_test": "flaky: `{command}` failed, then passed on a re-run",
    "final_base": "final check: the whole suite at base {base:.10}: {suite_line}",
    "final_checked": "final check at {tip:.10}: {final_line}",
    "person_message": "message for {to}: {text_line}",
    "agent_message": "{sender} → {to}: {text_line}",
    "message_refused": "message from {sender} to {to} refused: {why}",
    "message_rejected": "message {id} to {to} not delivered: {why}",
    "stop_requested": "stop requested for {to}",
    "disk_full": "the disk is full: {why_line}; nothing new starts until there is room",
    "disk_ok": "the disk has room again ({free_bytes} bytes free); the run goes on",
    "disk_error": "the disk watch failed one look: {error}",
    "fleet_finished": "fleet finished: {states_line}",
    "task_stopped": "{task} stopped: {why_line}",
    "task_needs_you": "{task} needs you: {why} — reopen it with `hilbert retry {run} {task}`",
    "task_retry_asked": "{task} reopened by the person{edited_note}",
    "task_error": "{task}: a harness step failed: {error}",
    "merge_error": "the merge queue failed: {error}",
    "lead_consulted": "the lead is asked about {task_list}",
    "fleet_resumed": "fleet resumed by pid {pid} on {host}",
    "fleet_interrupted": "fleet interrupted: {why}",
    "attempt_resumed": "{worker} resumes {task} ({how}): {why}",
    "merge_landing": "landing {task_list} at {commit:.10}",
    "merge_reconciled": "reconciled {task_list} at {commit:.10}: {how}",
    "crash_point": "crash point {point}: the orchestrator kills itself (test only)",
    "lead_action": "lead: {action} {task_list}{lead_detail}",
    "plan_changed": "the plan now has {n_tasks} tasks",
    "lead_answered": "the lead is done ({status}){still_line}",
    "lead_message": "lead → {to}: {text_line}",
    "workspaces_fallback": "workspaces are full private clones from now on: {why}",
    "proposal_held": "held for a decision: {id} {action} {task_list}",
    "proposal_approved": "{decider} approved {id}",
    "proposal_rejected": "{decider} rejected {id}: {why_line}",
    "taint_snapshot": "{worker} reads a peer's message: its work tree before it is {commit:.10}{why_line}",
    "proposal_applied": "{id} applied",
    "proposal_stale": "{id} no longer applies: {why_line}",
    "budget_asked": "{id}: {agent} waits for you — {cap}{scope_line} reached its soft cap{reached_line}",
    "budget_halted": "{id}: {agent} halts — {cap}{scope_line} reached its hard cap{reached_line}",
    "budget_waiting": "{agent} waits for your answer to {id} before its next model call",
    "budget_raised": "the person raised {id} by {by}",
    "admission_waiting": "{worker} waits to start {task}: the engine's KV cache {usage_pct} >= {limit_pct}",
    "admission_granted": "{worker} starts {task} after waiting {waited_s}s for the engine's KV cache",
    "budget_refused": "the person refused {id}: {why_line}",
    "climb_started": "climb started: `{metric}` ({goal}), {explorers} explorer(s), the best on {branch}",
    "baseline_measured": "the best ({commit:.10}) measured: median {median}, noise {noise}",
    "try_started": "try {try_no}: {explorer} starts from {base:.10}",
    "try_gated": "try {try_no} ({commit:.10}) gated: passed {passed}",
    "try_measured": "try {try_no} measured: median {median}, spread {spread}",
    "try_kept": "try {try_no} kept: {previous} -> {median}",
    "try_reverted": "try {try_no} reverted ({stage}): {reason}",
    "holdout_measured": "holdout of try {try_no}: median {median} (overfit: {overfit})",
    "climb_finished": "climb finished ({reason}): best {median}",
}


def _render_fleet(event: Event, store: EventStore) -> Rendered:
    data = dict(event.data)
    data.update(
        decider="the lead" if event.agent == "lead" else "the person",
        n_tasks=len(data.get("tasks", ())),
        task_list=", ".join(data.get("tasks", ())) or data.get("task", ""),
        by=f" ({data['worker']})" if data.get("worker") else "",
        verdict="passed" if data.get("passed") else "FAILED",
        summary_line=_cut(_first_line(str(data.get("summary", ""))), 80),
        gate_word={"done": "DONE", "not_done": "SENT BACK", "impossible": "IMPOSSIBLE"}.get(
            str(data.get("verdict")), "?"
        ),
        reasons_line=f" — {_cut(_first_line(str(data['reasons'][0])), 100)}" if data.get("reasons") else "",
        candidate_note=" → merge queue" if data.get("candidate") else "",
        why_line=_first_line(str(data.get("why", ""))),
        scope_line=f" of {data['scope']}" if data.get("scope") else "",
        reached_line=f" ({data['spent']:g} of {data['limit']:g})"
        if "spent" in data and "limit" in data
        else "",
        together=f" together with {', '.join(data['with_tasks'])}" if data.get("with_tasks") else "",
        newly=_newly(list(data.get("new_failures", ()))),
        n_failing=len(data.get("still_failing", ())),
        n_fixed=len(data.get("fixed", ())),
        text_line=_first_line(str(data.get("text", ""))),
        states_line=", ".join(
            f"{k} {str(v).replace('_', ' ')}" for k, v in dict(data.get("states", {})).items()
        ),
        lead_detail=_lead_detail(data),
        pairs_line="; ".join(
            f"{' × '.join(p.get('models', ()))}: {p.get('agreed')} agreed of "
            f"{'+'.join(map(str, p.get('findings', ())))} findings"
            for p in data.get("pairs", ())
        )
        or "no findings",
        testing_list=", ".join(data.get("testing", ())),
        usage_pct=_percent(data.get("usage")),
        limit_pct=_percent(data.get("limit")),
        suspects_list=", ".join(data.get("suspects", ())),
        short_command=_cut(str(data.get("command", "")), 60),
        run=event.run,
        status_words=str(data.get("status", "?")).replace("_", " "),
        edited_note=" (the task edited)" if data.get("edited") else "",
        suite_line="green" if data.get("ok") else f"{_plural(len(data.get('failing', ())), 'failing test')}",
        final_line=_final_line(data),
        still_line=f"; still escalated: {', '.join(data['still_escalated'])}"
        if data.get("still_escalated")
        else "",
    )
    failed = event.kind in ("merge_checks_failed", "merge_rejected", "merge_conflict", "final_checked") or (
        event.kind == "gate_step" and not data.get("passed")
    )
    text = data.get("output") or data.get("hunks") or "\n".join(data.get("findings", ()))
    lines = [ln for ln in str(text or "").splitlines() if ln.strip()]
    details = lines[-OUTPUT_LINES:] if failed else []  # a failing run's summary is at its end
    if failed and len(lines) > OUTPUT_LINES:
        details.insert(0, f"… ({_plural(len(lines) - OUTPUT_LINES, 'earlier line')})")
    return _FLEET_LINES[event.kind].format_map(_Tolerant(data)), details


class _Tolerant(dict[str, Any]):
    """An event's data for a line template: a key an older or newer writer did not write reads "?"."""

    def __missing__(self, key: str) -> str:
        return "?"


def _final_line(data: dict[str, Any]) -> str:
    if data.get("error"):
        return f"could not run: {data['error']}"
    counts = [
        f"{len(data.get(key, ()))} {label}"
        for key, label in (("new", "new failing"), ("flaky", "flaky"), ("preexisting", "failing at base too"))
        if data.get(key)
    ]
    repair = f"; {data['repair']} added to repair them" if data.get("repair") else ""
    return (", ".join(counts) or "green, nothing new failing") + repair


def _lead_detail(data: dict[str, Any]) -> str:
    if data.get("into"):
        return " into " + ", ".join(data["into"])
    said = data.get("note") or data.get("reason")
    return f": {_first_line(str(said))}" if said else ""


def _render_compacted(event: Event, store: EventStore) -> Rendered:
    data = event.data
    how = "restored on restart" if data.get("resumed") else "compacted"
    head = (
        f"context {how} ({data['strategy']}): {data['tokens_before']:,} → {data['tokens_after']:,} "
        f"tokens, {data['messages_before']} → {data['messages_after']} messages"
    )
    pinned = store.get_messages([data["pinned"]])[0].content if data.get("pinned") else ""
    restated = [line for line in pinned.splitlines()[1:] if line.strip()][:OUTPUT_LINES]
    return head + (", the task state restated:" if restated else ""), restated


def _render_other(event: Event, store: EventStore) -> Rendered:
    return f"{event.kind} {json.dumps(event.data, ensure_ascii=False, separators=(',', ':'))}", []


_RENDERERS: dict[str, Callable[[Event, EventStore], Rendered]] = {
    AGENT_STARTED: _render_started,
    MODEL_CALL: _render_model_call,
    MODEL_ERROR: _render_model_error,
    TOOL_RESULT: _render_tool_result,
    MESSAGE_INJECTED: _render_injected,
    AGENT_STOPPED: _render_stopped,
    POLICY_ACTION: _render_policy_action,
    "context_compacted": _render_compacted,
    **{kind: _render_fleet for kind in _FLEET_LINES},
}


# -- small text helpers ---------------------------------------------------------------------------


def _percent(share: Any) -> str:
    return f"{share:.0%}" if isinstance(share, int | float) else "?"


def _clock(when: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(when))


def _tokens(usage: dict[str, Any]) -> str:
    cached, written = int(usage.get("cache_read_tokens", 0)), int(usage.get("cache_write_tokens", 0))
    cache = [f"{cached:,} cached"] if cached else []
    cache += [f"{written:,} cache-written"] if written else []
    inside = f" ({', '.join(cache)})" if cache else ""
    return f"{int(usage.get('input_tokens', 0)):,} in{inside} / {int(usage.get('output_tokens', 0)):,} out"


def _subject(arguments: dict[str, Any]) -> str:
    if isinstance(arguments.get("claim"), str):
        return f"claim: {_first_line(arguments['claim'])}"
    for key in _SUBJECT_KEYS:
        if isinstance(arguments.get(key), str):
            value = _first_line(arguments[key], 100)
            return f"`{value}`" if key in ("command", "cmd") else value
    return _cut(json.dumps(arguments, ensure_ascii=False, separators=(",", ":")), 100) if arguments else ""


def _exit_code(lines: list[str]) -> int | None:
    for line in [*lines[:2], *lines[-2:]]:
        if match := _EXIT_LINE.match(line):
            return int(match.group(1))
    return None


def _excerpt(text: str, limit: int) -> list[str]:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if len(lines) <= limit:
        return lines
    return [*lines[:limit], f"… ({_plural(len(lines) - limit, 'more line')})"]


def _first_line(text: str, width: int = MAX_WIDTH) -> str:
    lines = text.strip().splitlines()
    first = lines[0] if lines else ""
    return _cut(first + (" …" if len(lines) > 1 else ""), width)


def _cut(text: str, width: int = MAX_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _newly(names: list[str]) -> str:
    """A rejection's failures new since its base, the first few named."""
    if not names:
        return ""
    shown = ", ".join(names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")
    return f" — {_plural(len(names), 'new failure')}: {shown}"
