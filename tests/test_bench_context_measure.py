"""The replay benchmark's fixed definitions (bench/context_bench/measure.py), checked with numbers by hand.

A word tokenizer (one token per whitespace-separated word) makes every count easy to check by hand:
a message is its words plus 3 framing tokens. The strategies here are small local ones whose output
is obvious, so the numbers test the measurement, not a real strategy.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))  # the bench's own packages, as its scripts see them

from context_bench.measure import (  # noqa: E402
    common_prefix,
    edited_files,
    evidence,
    failure,
    figures,
    floor,
    replay,
    summarizing_tokens,
    task_identifiers,
)
from context_bench.trajectory import Trajectory  # noqa: E402
from hilbert.context.render import TokenCache  # noqa: E402
from hilbert.context.summarize import RecordingSummarizer  # noqa: E402
from hilbert.models.types import Message  # noqa: E402


@dataclass(frozen=True)
class Words:
    name: str = "words"

    def encode(self, text: str) -> list[int]:
        return [zlib.crc32(word.encode()) for word in text.split()]

    def count(self, text: str) -> int:
        return len(text.split())


def fence(command: str) -> str:
    return f"```bash\n{command}\n```"


PYTEST = fence("pytest tests/test_util.py")
# message tokens (words + 3):       m0 7, m1 9, m2 9, m3 6, m4 10, m5 8, m6 12, m7 4, m8 12, m9 5
MESSAGES = (
    Message("system", "You are an agent."),
    Message("user", "<pr_description>\nFix `parse_row` in pkg/util.py\n</pr_description>"),
    Message("assistant", f"THOUGHT: list files\n\n{fence('ls')}"),
    Message("user", "<returncode>0</returncode>\npkg/util.py\ntests/test_util.py"),
    Message("assistant", "THOUGHT: run test_util\n\n" + PYTEST),
    Message("user", "<returncode>1</returncode>\nFAILED tests/test_util.py::test_parse_row - AssertionError"),
    Message("assistant", "THOUGHT: fix parse_row\n\n" + fence("sed -i 's/a/b/' pkg/util.py")),
    Message("user", "<returncode>0</returncode>"),
    Message("assistant", "THOUGHT: rerun test_parse_row in tests/test_util.py\n\n" + PYTEST),
    Message("user", "<returncode>0</returncode>\npassed"),
)  # fmt: skip
TRAJECTORY = Trajectory("tiny", MESSAGES, (None,) * len(MESSAGES))
MASKED = Message("user", "[masked]")


@dataclass(frozen=True)
class Everything:
    name: str = "everything"

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        return list(messages)


@dataclass(frozen=True)
class MaskAllButLast:
    """Every observation but the last becomes `[masked]` (observations: the odd indices from 3)."""

    name: str = "mask-all-but-last"

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        last = max((i for i in range(3, len(messages), 2)), default=None)
        return [MASKED if i % 2 == 1 and i >= 3 and i != last else m for i, m in enumerate(messages)]


@dataclass(frozen=True)
class SummarizeTurns:
    """From the second call on: the first two messages, then one summary of all the turns."""

    summarizer: RecordingSummarizer
    name: str = "summarize-turns"

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        if len(messages) < 4:
            return list(messages)
        return [*messages[:2], Message("user", self.summarizer(messages[2:]))]


def count_span(span: Sequence[Message]) -> str:
    return f"{len(span)} messages"


@pytest.fixture
def tokens() -> TokenCache:
    return TokenCache(Words())


def test_common_prefix_counts_whole_messages_then_tokens_inside_the_first_that_differs(
    tokens: TokenCache,
) -> None:
    m0, m1, m2 = MESSAGES[:3]
    assert common_prefix([m0, m1], [m0, m1, m2], tokens) == 16
    assert common_prefix([m0, m1, m2], [m0, m1], tokens) == 16
    # the role's framing (2 tokens) and "a b" are shared, "c" / "d" differ
    assert common_prefix([m0, Message("user", "a b c")], [m0, Message("user", "a b d")], tokens) == 7 + 4
    assert common_prefix([Message("user", "a")], [Message("assistant", "a")], tokens) == 1
    assert common_prefix([], [m0], tokens) == 0


def test_cost_of_sending_everything_is_new_tokens_plus_p_times_the_repeated_prefix(
    tokens: TokenCache,
) -> None:
    run = replay(TRAJECTORY, Everything(), tokens)
    assert [c.index for c in run.calls] == [2, 4, 6, 8]
    assert [c.sent for c in run.calls] == [16, 31, 49, 65]
    assert [c.cached for c in run.calls] == [0, 16, 31, 49]
    assert run.cost(0.1) == pytest.approx(65 + 96 * 0.1)
    assert run.cost(1.0) == 161 == run.cumulative_input
    assert run.peak == 65
    assert run.recall == 1.0 and run.retention() == 1.0


@dataclass(frozen=True)
class HeadAndLastTurn:
    """The system prompt, the task, and only the last turn (an assistant message and its observation)."""

    name: str = "head-and-last-turn"

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        return [*messages[:2], *messages[2:][-2:]]


def test_the_floor_is_what_sending_only_the_head_and_the_new_messages_costs(tokens: TokenCache) -> None:
    everything = replay(TRAJECTORY, Everything(), tokens)
    head = tokens.total(list(MESSAGES[:2]))
    assert head == 16
    # the first call in full; then the new messages (15, 18, 16 tokens) uncached, the head cached
    assert floor(everything, head, 0.1) == pytest.approx(16 + 15 + 18 + 16 + 3 * 1.6)
    for p in (0.1, 0.25, 1.0):
        least = floor(everything, head, p)
        for strategy in (Everything(), MaskAllButLast()):
            assert replay(TRAJECTORY, strategy, tokens).cost(p) >= least
        # reached, but for the role's framing (2 tokens) a new message shares with the one it replaced
        shared = 3 * 2 * (1 - p)
        assert replay(TRAJECTORY, HeadAndLastTurn(), tokens).cost(p) == pytest.approx(least - shared)


def test_masking_breaks_the_cached_prefix_where_it_changes_an_old_message(tokens: TokenCache) -> None:
    run = replay(TRAJECTORY, MaskAllButLast(), tokens)
    assert [c.sent for c in run.calls] == [16, 31, 47, 59]
    # call 6: m0-m2 kept (25) + the framing shared by m3 and its placeholder (2); call 8: up to m4 (39) + 2
    assert [c.cached for c in run.calls] == [0, 16, 27, 41]
    assert run.cost(0.1) == pytest.approx(69 + 84 * 0.1)
    result = figures([run], [replay(TRAJECTORY, Everything(), tokens)])
    assert result.cost[0.1] == pytest.approx(77.4 / 74.6)
    assert result.cost[1.0] == pytest.approx(153 / 161)
    assert result.mean_cumulative_input == 153 and result.median_peak == 59


def test_recall_counts_identifiers_first_seen_in_an_observation_and_missing_from_what_was_sent(
    tokens: TokenCache,
) -> None:
    known = evidence(TRAJECTORY)
    # turn 4 names test_util and tests/test_util.py, both first in observation 3; turn 6 names pkg/util.py,
    # first in the task (not a target); turn 8 names test_parse_row (first in observation 5)
    assert known.targets == {
        2: frozenset(),
        4: frozenset({"test_util", "tests/test_util.py"}),
        6: frozenset(),
        8: frozenset({"test_parse_row", "tests/test_util.py"}),
    }
    run = replay(TRAJECTORY, MaskAllButLast(), tokens, known=known)
    # at turn 8 observation 5 is masked: test_parse_row is gone, tests/test_util.py is still in turn 4's text
    assert [c.recall for c in run.calls] == [(0, 0), (2, 2), (0, 0), (1, 2)]
    assert run.recall == pytest.approx((1 + 0.5) / 2)


def test_retention_of_edited_files_the_last_failure_and_the_task_identifiers(tokens: TokenCache) -> None:
    known = evidence(TRAJECTORY)
    task = frozenset({"pkg/util.py", "parse_row"})
    assert known.facts[6] == {
        "files": frozenset(),
        "failure": frozenset({"tests/test_util.py::test_parse_row"}),
        "task": task,
    }
    assert known.facts[8]["files"] == frozenset({"pkg/util.py"})  # sed -i in turn 6
    assert known.facts[8]["failure"] == known.facts[6]["failure"]  # observation 7 shows no failure
    run = replay(TRAJECTORY, MaskAllButLast(), tokens, known=known)
    # (kept, total) per kind: files, failure, task
    assert [c.retained for c in run.calls] == [
        ((0, 0), (0, 0), (2, 2)),
        ((0, 0), (0, 0), (2, 2)),
        ((0, 0), (1, 1), (2, 2)),
        ((1, 1), (0, 1), (2, 2)),
    ]
    assert run.retention() == pytest.approx((1 + 1 + 1 + 0.75) / 4)
    assert (run.retention("files"), run.retention("failure"), run.retention("task")) == (1.0, 0.5, 1.0)


def test_summarizing_calls_are_counted_in_and_out_once_per_span(tokens: TokenCache) -> None:
    recorder = RecordingSummarizer(count_span)
    run = replay(TRAJECTORY, SummarizeTurns(recorder), tokens, recorder=recorder)
    assert [len(span) for span, _ in recorder.calls] == [2, 4, 6]
    assert [(c.summary_in, c.summary_out) for c in run.calls] == [(0, 0), (15, 2), (33, 2), (49, 2)]
    assert summarizing_tokens(recorder.calls, tokens) == (97, 6)
    assert [c.sent for c in run.calls] == [16, 21, 21, 21]
    assert [c.cached for c in run.calls] == [0, 16, 18, 18]
    assert run.cost(0.1) == pytest.approx(27 + 52 * 0.1 + 103)
    again = replay(TRAJECTORY, SummarizeTurns(recorder), tokens, recorder=recorder)
    assert len(recorder.calls) == 3 and all(c.summary_in == 0 for c in again.calls)  # memoized


def test_figures_average_recall_per_trajectory_then_over_trajectories(tokens: TokenCache) -> None:
    short = Trajectory("short", MESSAGES[:6], (None,) * 6)  # calls 2 and 4: recall 1
    runs = [replay(t, MaskAllButLast(), tokens) for t in (TRAJECTORY, short)]
    base = [replay(t, Everything(), tokens) for t in (TRAJECTORY, short)]
    result = figures(runs, base)
    assert result.recall == pytest.approx((0.75 + 1.0) / 2)  # not the pooled 5/6 of turns
    assert result.trajectories == 2 and result.calls == 6
    assert result.median_peak == (59 + 31) / 2
    assert result.over == {16_384: 0.0, 32_768: 0.0}
    with pytest.raises(ValueError):
        figures(runs, base[:1])


@pytest.mark.parametrize(
    ("text", "files"),
    [
        (fence("cat <<'EOF' > new_file.py\nif a > b:\n    print(a)\nEOF"), ["new_file.py"]),
        (fence("sed -i.bak -e 's/x/y/' src/a.py ./src/b.py && grep -n y src/a.py"), ["src/a.py", "src/b.py"]),
        (fence("sed -n '1,5p' src/a.py"), []),
        (fence("python reproduce.py > /dev/null 2>&1 && echo done >> notes.txt"), ["notes.txt"]),
        (fence("git apply <<'EOF'\n--- a/pkg/x.py\n+++ b/pkg/x.py\n@@ -1 +1 @@\nEOF"), ["pkg/x.py"]),
        (fence("echo x | tee -a log/out.txt"), ["log/out.txt"]),
        (fence("python - <<'EOF'\nimport pathlib\npathlib.Path('y.py').write_text(s)\nEOF"), ["y.py"]),
        (fence("python -c \"open('o/c.txt', 'w')\" && python -c \"open('in.txt').read()\""), ["o/c.txt"]),
        (fence("cat pkg/x.py | grep -n foo"), []),
        ("THOUGHT: I will run sed -i 's/a/b/' x.py later", []),  # not in a bash block: not a command
    ],
)  # fmt: skip
def test_edited_files_follow_the_documented_rules(text: str, files: list[str]) -> None:
    assert edited_files(text) == files


@pytest.mark.parametrize(
    ("observation", "fact"),
    [
        ("FAILED tests/t.py::test_a - assert 0\nFAILED tests/t.py::test_b\n2 failed", "tests/t.py::test_b"),
        ("tests/t.py::test_c FAILED   [ 50%]\ntests/t.py::test_d PASSED", "tests/t.py::test_c"),
        ('Traceback (most recent call last):\n  File "x.py"\nValueError: bad value', "ValueError: bad value"),
        ("ERROR: test_y (app.tests.T)\n----------", "test_y (app.tests.T)"),
        ("E       AssertionError: 1 != 2\n", "AssertionError: 1 != 2"),
        ("<returncode>0</returncode>\nall good\n    raise ValueError('x')", None),
        ("KeyError: " + "k" * 300, "KeyError: " + "k" * 190),
    ],
)  # fmt: skip
def test_the_last_failure_an_observation_shows(observation: str, fact: str | None) -> None:
    assert failure(observation) == fact


def test_task_identifiers_come_from_the_pr_description_when_there_is_one() -> None:
    task = (
        "<pr_description>\nIn `Table.read` (astropy/io/ascii/qdp.py) class QDPReader fails; see "
        "test_roundtrip and `x`.\n</pr_description>\nExample: cat <<'EOF' > newfile.py"
    )
    assert task_identifiers(task) == {
        "Table.read",
        "astropy/io/ascii/qdp.py",
        "class QDPReader",
        "test_roundtrip",
    }
    assert task_identifiers("Fix helper.py") == {"helper.py"}


def test_a_message_the_strategy_wrote_counts_by_its_text(tokens: TokenCache) -> None:
    @dataclass(frozen=True)
    class Restate:
        name: str = "restate"

        def __call__(self, messages: Sequence[Message]) -> list[Message]:
            if len(messages) < 8:
                return list(messages)
            note = Message("user", "earlier: tests/test_util.py::test_parse_row failed")
            return [*messages[:2], note, *messages[6:]]

    last = replay(TRAJECTORY, Restate(), tokens).calls[-1]
    assert last.recall == (2, 2)  # both identifiers of turn 8 are in the note
    assert last.retained == ((1, 1), (1, 1), (2, 2))
