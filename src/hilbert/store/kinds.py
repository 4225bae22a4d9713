"""The event kinds the agent loop writes, and the shape of each one's `data`: the contract between
the loop (writer) and every view (readers).

`HASH` below is a message blob key from `EventStore.put_messages`. Types are `TypedDict`s so a
writer can be type-checked; at run time `data` is a plain dict. A new kind, or a new optional key,
is added here first. Readers must tolerate kinds and keys they do not know (older or newer writers).
"""

from __future__ import annotations

from typing import Final, NotRequired, TypedDict

AGENT_STARTED: Final = "agent_started"
MODEL_CALL: Final = "model_call"
MODEL_ERROR: Final = "model_error"
TOOL_RESULT: Final = "tool_result"
MESSAGE_INJECTED: Final = "message_injected"
AGENT_STOPPED: Final = "agent_stopped"
POLICY_ACTION: Final = "policy_action"
CONTEXT_COMPACTED: Final = "context_compacted"  # strategy, tokens/messages before and after, pinned, summary

# Kinds that change the conversation (see `hilbert.store.conversation`).
CONVERSATION_KINDS: Final = (AGENT_STARTED, MODEL_CALL, TOOL_RESULT, MESSAGE_INJECTED)

# The fleet's kinds (the harness's, the person's, the lead's and workers' messages) are typed records in
# one registry: `hilbert.fleet.events.EVENTS`.
    "task_retried",  # task, why, decision
    "task_escalated",  # task, why, decision
    "task_stopped",  # task, why (the person or the cost cap)
    "task_error",  # task, error (a harness step failed)
    "gate_step",  # task, worker, commit, round, step (verify|integrity|tests_restored|heldout|model),
    #              passed, summary, findings, output
    "gate_running",  # task, worker, commit, round, step, elapsed_s (a long check is still running)
    "gate_verdict",  # task, worker, commit, round, verdict (done|not_done|impossible), reasons,
    #                 checks_passed (every step but the model's), claimed, model (its summary or null),
    #                 model_cost_usd
    "panel_reviewed",  # task, worker, commit, round, summary, send_back, reasons, reviews, agreed, pairs,
    #                   complete, errors, cost_usd (hilbert.judge.panel.PanelResult.to_json())
    "panel_skipped",  # task, worker, commit, round, why
    "panel_agreement",  # reviews, pairs: [{models, findings, agreed, tasks, rate}] (over the whole run)
    "worker_nudged",  # to, text (the liveness watch's message, delivered by the worker's inbox)
    "worker_stuck",  # task, worker, quiet_s
    "worker_hung",  # task, worker, quiet_s (no heartbeat: its loop is cancelled and restarted)
    "worker_restarted",  # task, worker, why, restart, kept (messages resumed from the log)
    "liveness_error",  # error (one look of the liveness watch failed; it keeps watching)
    "workspace_closed",  # worker, message (what was kept and why)
    "workspaces_fallback",  # strategy, why
    "merge_batch_started",  # tasks, base
    "merge_checks_passed",  # tasks, commit
    "merge_checks_failed",  # tasks, commit, command, exit, timed_out, output, confirmed
    "merge_checks_baseline",  # commit, base, still_failing, fixed
    "merge_bisect",  # suspects, testing, base
    "merged",  # task, ref, commit
    "merge_rejected",  # task, command, exit, output
    "merge_conflict",  # task, ref, base, files, hunks
    "merge_requeued",  # tasks
    "merge_error",  # error
    "flaky_test",  # tasks, commit, command, first_exit, first_output, second_output
    "lead_consulted",  # tasks, session
    "lead_action",  # action, task, and note | reason | into; worker_messages_read
    "proposal_held",  # id, action, detail, arguments, added, notes, worker_messages, session
    "proposal_approved",  # id (agent "person")
    "proposal_rejected",  # id, why (agent "person")
    "proposal_applied",  # id
    "proposal_stale",  # id, why
    "plan_changed",  # tasks, plan (the PLAN.md written)
    "lead_answered",  # status, error, still_escalated
    "lead_message",  # to, text
    "person_message",  # to, text, and (signed runs) run, sender, role, hop, signature
    "agent_message",  # run, sender, role ("worker"), to, text, hop, signature (a worker's send_message)
    "message_refused",  # sender, to, why (rate limit, forward of a forward, too long)
    "message_rejected",  # id, to, why (its signature does not match: changed after it was written)
    "stop_requested",  # to ("*": everyone)
    "fleet_finished",  # states, tip, stuck
)


class UsageData(TypedDict):
    """`hilbert.models.types.Usage` as JSON (`dataclasses.asdict`)."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int


class AgentStarted(TypedDict):
    task: str
    model: str
    workspace: str
    tools: list[str]
    messages: list[str]  # HASHes of the initial system + user messages (the whole history on resume)
    resumed: NotRequired[bool]  # restarted from the log's conversation (absent in older logs)


class ModelCall(TypedDict):
    request: list[str]  # HASHes of the conversation at the call, in order
    sent: NotRequired[list[str]]  # HASHes of what was sent instead, when compaction changed it
    tools: list[str]
    response: str  # HASH of the assistant message
    usage: UsageData
    cost_usd: float
    latency_s: float
    ttft_s: float | None
    stop_reason: str
    model: str
    attempts: int


class ModelError(TypedDict):
    error: str  # exception class name
    message: str


class ToolResult(TypedDict):
    call_id: str
    name: str
    arguments: dict[str, object]
    message: str  # HASH of the role=tool message appended to the conversation
    is_error: bool
    duration_s: float


class MessageInjected(TypedDict):
    message: str  # HASH of the appended message
    by: str  # the policy's name
    moment: NotRequired[str]  # the policy hook: before_model_call, after_tool_call, on_stop
    action: NotRequired[str]  # the action's kind (e.g. inject, resume)


class PolicyAction(TypedDict):
    """A policy action that did not change the conversation (e.g. a halt)."""

    policy: str
    moment: str
    action: str
    reason: NotRequired[str]
    cause: NotRequired[str]


class AgentStopped(TypedDict):
    status: str
    cause: NotRequired[str]  # why it was halted, as data (`hilbert.agent.policies.Cause`)
    turns: int
    usage: UsageData
    cost_usd: float
    claim: NotRequired[str]
    evidence: NotRequired[str]
    reason: NotRequired[str]
