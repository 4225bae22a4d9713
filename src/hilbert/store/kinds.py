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
