"""The compaction strategies on synthetic conversations: what they send, and the properties they keep."""

from __future__ import annotations

import pytest

from hilbert.context.pinned import PINNED_MARK, SUMMARY_MARK
from hilbert.context.render import TokenCache
from hilbert.context.strategies import DEFAULT, SPECS, Strategy, is_observation, strategy_named
from hilbert.context.summarize import ExtractiveSummarizer, RecordingSummarizer, span_key
from hilbert.context.tokens import openai_encoding
from hilbert.errors import UserError
from hilbert.models.types import Message, ToolCall

TASK = (
    "Task t1: fix the parser\n"
    "The task is done when `pytest -q tests/test_parse.py` passes. Change only what the task needs.\n"
    "Do not edit or skip tests. Finish with the command's output as evidence."
)
SAVED = "[... 9,000 more bytes; the whole output is in .hilbert/outputs/output-7-3.txt]"


def tokens() -> TokenCache:
    return TokenCache(openai_encoding("o200k_base"))


def conversation(turns: int, *, feedback_at: int | None = None) -> list[Message]:
    """A hilbert-format conversation: each turn one or two tool calls (a shell command, sometimes an
    edit), their results (long outputs), and now and then an injected reminder."""
    messages = [Message("system", "You are a careful engineer."), Message("user", TASK)]
    for k in range(turns):
        calls = [ToolCall(f"s{k}", "shell", {"command": f"grep -n parse src/mod{k}.py"})]
        if k % 4 == 1:
            calls.append(ToolCall(f"e{k}", "edit_file", {"path": f"src/mod{k}.py", "old": "a", "new": "b"}))
        messages.append(Message("assistant", f"Looking at src/mod{k}.py next.", tool_calls=tuple(calls)))
        output = f"[exit {k % 2}]\n" + f"src/mod{k}.py:{k}: def parse_{k}(text): ...\n" * 40
        if k % 5 == 0:
            output += SAVED + "\n"
        messages.append(Message("tool", output, tool_call_id=f"s{k}", name="shell"))
        if k % 4 == 1:
            messages.append(Message("tool", "edited", tool_call_id=f"e{k}", name="edit_file"))
        if k == feedback_at:
            messages.append(
                Message("user", "The harness committed your work (abc123) and ran its stop gate: not done.")
            )
        elif k % 6 == 5:
            messages.append(Message("user", "Reminder (why: the regular reminder)\n- [ ] Keep to the task."))
    return messages


def call_points(messages: list[Message]) -> list[int]:
    """The lengths at which the agent called the model: before each assistant message, and the end."""
    return [i for i in range(3, len(messages)) if messages[i].role == "assistant"] + [len(messages)]


def build(spec: str) -> tuple[Strategy, TokenCache, RecordingSummarizer]:
    counter = tokens()
    summarizer = RecordingSummarizer(ExtractiveSummarizer())
    return strategy_named(spec, tokens=counter, summarizer=summarizer), counter, summarizer


def assert_pairs_intact(sent: list[Message]) -> None:
    """Every tool result follows the assistant message that called it, and every call has a result."""
    open_calls: set[str] = set()
    for message in sent:
        if message.role == "tool":
            assert message.tool_call_id in open_calls, f"result {message.tool_call_id} without its call"
            open_calls.discard(message.tool_call_id)
        else:
            assert not open_calls, f"calls {open_calls} without results"
            open_calls = {c.id for c in message.tool_calls}


def test_none_sends_everything() -> None:
    messages = conversation(12)
    strategy, _, _ = build("none")
    assert strategy(messages) == messages


def test_mask_keeps_the_last_observations_and_says_what_each_masked_one_was() -> None:
    messages = conversation(30)
    strategy, counter, _ = build("mask:6,4")
    sent = strategy(messages)
    observations = [i for i in range(len(messages)) if is_observation(messages, i)]
    masked = [i for i in observations if sent[i] != messages[i]]
    # whole observations, oldest first; between 6 and 6+4-1 kept as they were
    assert masked == observations[: len(masked)] and 6 <= len(observations) - len(masked) < 10
    assert [m.role for m in sent] == [m.role for m in messages]
    assert all(sent[i] == messages[i] for i in range(len(messages)) if i not in masked)
    first = sent[observations[0]]
    assert first.tool_call_id == "s0" and first.name == "shell"
    assert "`grep -n parse src/mod0.py`" in first.content and "exit 0" in first.content
    assert "42 lines" in first.content
    assert ".hilbert/outputs/output-7-3.txt" in first.content  # the saved output's pointer is kept
    assert "exit 1" in sent[observations[1]].content  # turn 1's shell command failed
    assert "`edit_file(" in sent[observations[2]].content and "→ ok" in sent[observations[2]].content
    assert counter.total(sent) < counter.total(messages) / 3


def test_mask_reads_mini_swe_agent_observations() -> None:
    messages = [Message("system", "s"), Message("user", "fix it")]
    for k in range(8):
        messages.append(Message("assistant", f"THOUGHT: look\n\n```bash\ncat a{k}.py\n```"))
        messages.append(Message("user", f"<returncode>{k % 2}</returncode>\n<output>\n" + "x\n" * 30))
    sent = strategy_named("mask:2,1", tokens=tokens())(messages)
    assert "`cat a0.py` → exit 0" in sent[3].content and "`cat a1.py` → exit 1" in sent[5].content
    assert sent[-1] == messages[-1] and sent[2] == messages[2]  # assistant turns are never masked


@pytest.mark.parametrize("spec", ["mask:5,5", "mask:5,1", "forget:2,4000", "summary:4000", "hybrid:4,4,3000"])
def test_between_cuts_what_is_sent_only_grows_at_its_end(spec: str) -> None:
    messages = conversation(60, feedback_at=33)
    strategy, _, _ = build(spec)
    cuts, before = 0, None
    for n in call_points(messages):
        sent = strategy(messages[:n])
        assert_pairs_intact(sent)
        assert sent[:2] == messages[:2]  # the system prompt and the task are never cut
        assert sent[-1] == messages[n - 1]
        if before is not None and sent[: len(before)] != before:
            cuts += 1
        before = sent
    observations = sum(is_observation(messages, i) for i in range(len(messages)))
    every = int(spec.split(":")[1].split(",")[1]) if spec.startswith(("mask", "hybrid")) else 0
    steps = observations // every if every else 0
    assert 2 <= cuts <= steps + (0 if spec.startswith("mask") else 20)  # cuts come in steps
    if every == 1:
        assert cuts >= 50  # P=1 moves every turn: the cache-unfriendly case


@pytest.mark.parametrize("spec", ["forget:2,4000", "summary:4000", "hybrid:4,4,3000"])
def test_budgeted_strategies_stay_near_their_budget_and_restate_the_task_after_each_cut(spec: str) -> None:
    messages = conversation(60, feedback_at=33)
    strategy, counter, summarizer = build(spec)
    budget = int(spec.rsplit(",", 1)[-1].split(":")[-1])
    largest_turn = 600  # one turn of this conversation, at most
    for n in call_points(messages):
        sent = strategy(messages[:n])
        assert counter.total(sent) <= budget + largest_turn
    pinned = [m for m in sent if m.content.startswith(PINNED_MARK)]
    assert len(pinned) == 1 and sent.index(pinned[0]) in (2, 3)  # right after the cut
    assert "`pytest -q tests/test_parse.py` passes" in pinned[0].content
    assert "Do not edit or skip tests." in pinned[0].content
    assert "src/mod1.py" in pinned[0].content  # the files changed so far
    assert "The harness committed your work (abc123)" in pinned[0].content  # the judge's feedback
    summaries = [m for m in sent if m.content.startswith(SUMMARY_MARK)]
    assert len(summaries) == (0 if spec.startswith("forget") else 1)
    if summaries:
        assert summarizer.calls and "## Changes" in summaries[0].content
        assert summaries[0].content.endswith(summarizer.calls[-1][1])


def test_forget_keeps_the_first_k_messages_to_the_end_of_their_turn() -> None:
    messages = conversation(40)
    strategy, _, _ = build("forget:5,3000")
    sent = strategy(messages)
    head = next(i for i in range(5, len(messages)) if messages[i].role == "assistant")
    assert sent[:head] == messages[:head] and sent[head].content.startswith(PINNED_MARK)
    assert len(sent) < len(messages) / 2


def test_a_summary_is_made_once_per_span_and_the_same_history_gives_the_same_context() -> None:
    messages = conversation(50)
    strategy, _, summarizer = build("summary:4000")
    first = [strategy(messages[:n]) for n in call_points(messages)]
    calls = len(summarizer.calls)
    again, _, _ = build("summary:4000")
    assert [again(messages[:n]) for n in call_points(messages)] == first
    assert [strategy(messages[:n]) for n in call_points(messages)] == first
    assert len(summarizer.calls) == calls >= 2
    assert len({span_key(span) for span, _ in summarizer.calls}) == calls


def test_a_summary_of_a_summary_carries_what_was_done_before() -> None:
    messages = conversation(60)
    strategy, _, summarizer = build("summary:3000")
    strategy(messages)
    assert len(summarizer.calls) >= 2
    span, text = summarizer.calls[-1]
    assert span[0].content.startswith(SUMMARY_MARK)
    assert "changed src/mod1.py" in text  # an edit made before the first summary


def test_judge_feedback_is_never_masked() -> None:
    messages = conversation(30, feedback_at=2)
    sent = strategy_named("mask:2,1", tokens=tokens())(messages)
    assert any(m.content.startswith("The harness committed your work") for m in sent)


def test_a_cut_that_drops_the_judges_feedback_restates_it_whole() -> None:
    messages = conversation(30, feedback_at=2)
    at = next(i for i, m in enumerate(messages) if m.content.startswith("The harness committed your work"))
    long = messages[at].content + "\n" + "FAILED tests/test_parse.py::test_dates - AssertionError\n" * 120
    messages[at] = Message("user", long + "Fix it, then call finish again.")
    assert len(messages[at].content) > 6000
    sent = strategy_named("forget:2,3000", tokens=tokens())(messages)
    assert messages[at] not in sent  # its turn was dropped ...
    pinned = next(m.content for m in sent if m.content.startswith(PINNED_MARK))
    assert messages[at].content in pinned  # ... and the feedback is restated, to its last line


def test_mask_counts_turns_so_a_turn_with_two_tool_results_keeps_both() -> None:
    messages = conversation(10)  # turns 1, 5 and 9 call two tools
    sent = strategy_named("mask:2,1", tokens=tokens())(messages)
    turns = [i for i, m in enumerate(messages) if m.role == "assistant"]
    kept = {i for i, m in enumerate(sent) if m.role == "tool" and not m.content.startswith("[output masked")}
    assert kept == {i for i in range(turns[-2], len(messages)) if messages[i].role == "tool"}
    assert len(kept) == 3  # turn 8's result, and both of turn 9's


def test_a_masked_failure_still_reads_as_an_error() -> None:
    messages = conversation(12)
    messages[3] = Message(
        "tool", "refused by policy: outside your workspace", tool_call_id="s0", is_error=True
    )
    sent = strategy_named("mask:2,1", tokens=tokens())(messages)
    assert sent[3].content.startswith("[output masked by hilbert") and sent[3].is_error


def test_specs_parse_and_bad_ones_say_what_is_wrong() -> None:
    assert strategy_named("forget:2,32k", tokens=tokens()).name == "forget:2,32000"
    for spec in (*SPECS, DEFAULT):
        assert strategy_named(spec, tokens=tokens()).name == spec
    for bad in ("mask", "mask:3", "mask:0,1", "forget:1,100", "summary:x", "lru:5"):
        with pytest.raises(UserError) as caught:
            strategy_named(bad, tokens=tokens())
        assert caught.value.hint
