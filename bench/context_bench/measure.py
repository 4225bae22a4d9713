"""The replay benchmark's fixed definitions (issue 6): what a strategy costs and what it keeps.

Pure functions over a recorded trajectory; no model. At every model call (each assistant message `i`)
the strategy is given the messages before `i` and what it returns is "sent". Tokens are those of one
`TokenCache` (one ruler for every strategy). The definitions, which must not drift:

- **cost** of a call: `uncached + p × cached` input tokens, where `cached` is the longest common
  prefix, in tokens, of what was sent and what the same strategy sent at the previous call of the
  same trajectory (0 at the first call) and `uncached` the rest; plus every token into and out of the
  summarizing calls the strategy made for that call (the span's messages in, the text out, each at 1).
  Compared with `none` as the ratio of the corpus totals (what a fleet pays), at p = 0.1, 0.25, 0.5, 1.
- **next-step recall**: the identifiers of assistant turn `i` (distinct matches of `IDENTIFIER` in its
  text) whose earliest occurrence (as a substring) among messages `[0, i)` is in an observation; the
  share of them found in what was sent for turn `i`. Averaged over a trajectory's turns that have
  any, then over trajectories.
- **retention** of must-keep facts at each call: the share found in what was sent of
  - files edited by the agent's earlier commands (`edited_files`),
  - the last failing test or error seen in an earlier observation (`failure`),
  - the task's identifiers (`task_identifiers`);
  averaged over a trajectory's calls, then over trajectories (also per kind).
- also: mean cumulative input tokens (the sum of a trajectory's sent tokens), median peak context
  (its largest call), the share of all calls over 16k (16,384) and 32k (32,768) tokens.

"Found in what was sent" means: a substring of the rendered text (`render`) of one sent message.
"""

from __future__ import annotations

import re
import shlex
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hilbert.context.render import TokenCache, render
from hilbert.context.strategies import Strategy, is_observation
from hilbert.context.summarize import RecordingSummarizer
from hilbert.models.types import Message

from .trajectory import Trajectory

IDENTIFIER = re.compile(r"[\w./-]+\.py\b|\btest_\w+|\b(?:def|class) \w+")
PRICES = (0.1, 0.25, 0.5, 1.0)
OVER = (16_384, 32_768)
KINDS = ("files", "failure", "task")
FACT_CHARS = 200  # a failure line is kept to its first 200 characters (still a substring of the original)

_BASH = re.compile(r"```bash\s*\n(.*?)\n```", re.S)  # mini-swe-agent's own action pattern
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
_DIFF_TARGET = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.M)
_PY_WRITE = re.compile(
    r"""open\(\s*(['"])([^'"\n]+)\1\s*,\s*(?:mode\s*=\s*)?['"][wax]"""
    r"""|Path\(\s*(['"])([^'"\n]+)\3\s*\)\s*\.write_(?:text|bytes)\("""
)
_REDIRECT = re.compile(r"(?<![\w<>&-])>>?\s*(['\"]?)([\w./-]+)\1")
_SEGMENT = re.compile(r"&&|\|\||[;|\n]")
_FAILED_TEST = re.compile(
    r"^(?:FAILED|ERROR) (\S+::\S+)|^(\S+::\S+) (?:FAILED|ERROR)\b|^(?:FAIL|ERROR): (test\w* \([\w.]+\))"
)
_ERROR_LINE = re.compile(r"^(?:E\s+)?((?:\w+\.)*\w*(?:Error|Exception)\b(?::.*)?)$")
_PR = re.compile(r"<pr_description>(.*?)</pr_description>", re.S)
_BACKTICKED = re.compile(r"`([A-Za-z_][\w.]+\w)(?:\(\))?`")


# ---- the must-keep facts ---------------------------------------------------------------------------


def commands(text: str) -> list[str]:
    """The bash blocks of an assistant message (mini-swe-agent's actions)."""
    return _BASH.findall(text)


def edited_files(text: str) -> list[str]:
    """Files the commands in assistant text `text` write, in order, without repeats, `./` dropped:
    - `sed -i` (any option spelling): its file arguments;
    - a stdout redirect (`> f`, `>> f`, so also `cat <<EOF > f`) or `tee [-a] f`, to a target that looks
      like a file name (a dot or a slash in it, not under /dev/);
    - a diff in the command (a heredoc for `patch`/`git apply`): its `+++ b/path` lines;
    - Python in the command (`python -c`, or a script written by a heredoc) calling
      `open('path', 'w'|'a'|'x')` or `Path('path').write_text/write_bytes(`.
    Redirects, `sed` and `tee` are read from the shell lines only (heredoc bodies left out)."""
    found: list[str] = []
    for command in commands(text):
        shell = _without_heredoc_bodies(command)
        found += _DIFF_TARGET.findall(command)
        found += [a or b for _, a, _, b in _PY_WRITE.findall(command)]
        found += [target for _, target in _REDIRECT.findall(shell)]
        for segment in _SEGMENT.split(shell):
            found += _sed_or_tee_files(segment)
    cleaned = (f.removeprefix("./") for f in found)
    files = (f for f in cleaned if ("." in f or "/" in f) and not f.startswith("/dev/") and f != "/dev/null")
    return list(dict.fromkeys(f for f in files if re.search(r"[A-Za-z]", f)))


def failure(observation: str) -> str | None:
    """The last failing test or error an observation shows: the last line that is a pytest
    `FAILED|ERROR nodeid` (or `nodeid FAILED|ERROR`) line, a unittest/Django `FAIL|ERROR: test (Class)`
    line, or an exception line (`[E   ]SomeError: ...` / `SomeException...`) — the node id, the test
    and its class, or the line, cut to `FACT_CHARS` characters. None when there is none."""
    last = None
    for line in observation.splitlines():
        test = _FAILED_TEST.match(line)
        error = _ERROR_LINE.match(line.strip()) if test is None else None
        if test is not None:
            last = next(g for g in test.groups() if g)
        elif error is not None:
            last = error.group(1).strip()
    return last[:FACT_CHARS] if last else None


def task_identifiers(task: str) -> set[str]:
    """The task's own names: `IDENTIFIER` matches and backticked names (`name`, `name()`, of 3+ characters)
    in its `<pr_description>` block when it has one (mini-swe-agent's template), else in all of it."""
    block = _PR.search(task)
    text = block.group(1) if block else task
    return set(IDENTIFIER.findall(text)) | set(_BACKTICKED.findall(text))


def _without_heredoc_bodies(command: str) -> str:
    kept, ending = [], None
    for line in command.splitlines():
        if ending is not None:
            ending = None if line.strip() == ending else ending
            continue
        kept.append(line)
        found = _HEREDOC.search(line)
        ending = found.group(2) if found else None
    return "\n".join(kept)


def _sed_or_tee_files(segment: str) -> list[str]:
    try:
        words = shlex.split(segment)
    except ValueError:
        return []
    if not words or words[0] not in ("sed", "tee"):
        return []
    args = [w for w in words[1:] if not w.startswith(">")]
    if words[0] == "tee":
        return [w for w in args if not w.startswith("-")]
    if not any(w.startswith("-i") or w.startswith("--in-place") for w in args):
        return []
    scripted, files, skip = False, [], False
    for word in args:
        if skip:
            skip = False
        elif word in ("-e", "-f", "--expression", "--file"):
            scripted, skip = True, True
        elif word.startswith("-"):
            continue
        elif not scripted:
            scripted = True  # the first operand is the script
        else:
            files.append(word)
    return files


# ---- what is the same for every strategy on one trajectory -----------------------------------------


@dataclass(frozen=True)
class Evidence:
    """Per call of one trajectory: its recall targets and must-keep facts; and where each of those
    strings occurs among the trajectory's messages (by index), so presence checks are set lookups."""

    targets: dict[int, frozenset[str]]
    facts: dict[int, dict[str, frozenset[str]]]
    occurs: dict[str, frozenset[int]]
    index_of: dict[Message, int]


def evidence(trajectory: Trajectory) -> Evidence:
    messages = trajectory.messages
    texts = [render(m) for m in messages]
    said = {i: set(IDENTIFIER.findall(texts[i])) for i in trajectory.calls}
    task = frozenset(task_identifiers(messages[1].content))
    edits = {i: edited_files(messages[i].content) for i in trajectory.calls}
    failures = {j: failure(texts[j]) for j in range(len(messages)) if is_observation(messages, j)}
    needles = set(task).union(*said.values(), *edits.values(), (f for f in failures.values() if f))
    occurs = {n: frozenset(j for j, text in enumerate(texts) if n in text) for n in needles}
    targets: dict[int, frozenset[str]] = {}
    facts: dict[int, dict[str, frozenset[str]]] = {}
    edited: dict[str, None] = {}
    last_failure: str | None = None
    for i in trajectory.calls:
        for j in range(max(facts, default=0), i):  # messages since the previous call
            last_failure = failures.get(j) or last_failure
        targets[i] = frozenset(
            n for n in said[i] if min(occurs[n]) < i and is_observation(messages, min(occurs[n]))
        )
        facts[i] = {
            "files": frozenset(edited),
            "failure": frozenset(filter(None, [last_failure])),
            "task": task,
        }
        edited.update(dict.fromkeys(edits[i]))  # known from the next call on
    index_of = {m: j for j, m in reversed(list(enumerate(messages)))}
    return Evidence(targets=targets, facts=facts, occurs=occurs, index_of=index_of)


# ---- one strategy on one trajectory -----------------------------------------------------------------


def common_prefix(a: Sequence[Message], b: Sequence[Message], tokens: TokenCache) -> int:
    """The longest common prefix, in tokens, of two sent lists: message by message, then within the
    first message that differs."""
    return _common_prefix([tokens.tokens(m) for m in a], [tokens.tokens(m) for m in b])


def _common_prefix(a: Sequence[tuple[int, ...]], b: Sequence[tuple[int, ...]]) -> int:
    total = 0
    for x, y in zip(a, b, strict=False):
        if x is y or x == y:
            total += len(x)
            continue
        for p, q in zip(x, y, strict=False):
            if p != q:
                break
            total += 1
        break
    return total


def summarizing_tokens(
    calls: Iterable[tuple[tuple[Message, ...], str]], tokens: TokenCache
) -> tuple[int, int]:
    """Tokens into (the span's messages) and out of (the text) a list of summarizing calls."""
    calls = list(calls)
    return (
        sum(tokens.total(span) for span, _ in calls),
        sum(tokens.tokenizer.count(text) for _, text in calls),
    )


@dataclass(frozen=True)
class Call:
    """One replayed model call: `sent` tokens, `cached` of them the prefix shared with the previous
    call, the summarizing tokens, and (kept, total) for the recall targets and each fact kind."""

    index: int
    sent: int
    cached: int
    summary_in: int
    summary_out: int
    recall: tuple[int, int]
    retained: tuple[tuple[int, int], ...]  # in KINDS order

    def cost(self, p: float) -> float:
        return self.sent - self.cached + p * self.cached + self.summary_in + self.summary_out


@dataclass(frozen=True)
class Replay:
    """One strategy on one trajectory."""

    trajectory: str
    strategy: str
    calls: tuple[Call, ...]

    def cost(self, p: float) -> float:
        return sum(c.cost(p) for c in self.calls)

    @property
    def cumulative_input(self) -> int:
        return sum(c.sent for c in self.calls)

    @property
    def peak(self) -> int:
        return max((c.sent for c in self.calls), default=0)

    @property
    def recall(self) -> float | None:
        return _mean(kept / total for kept, total in (c.recall for c in self.calls) if total)

    def retention(self, kind: str | None = None) -> float | None:
        """The mean share of facts (of one kind, or all) found in what was sent, over calls with any."""
        shares = []
        for call in self.calls:
            pairs = call.retained if kind is None else [call.retained[KINDS.index(kind)]]
            kept, total = sum(k for k, _ in pairs), sum(t for _, t in pairs)
            if total:
                shares.append(kept / total)
        return _mean(shares)


def replay(
    trajectory: Trajectory,
    strategy: Strategy,
    tokens: TokenCache,
    *,
    recorder: RecordingSummarizer | None = None,
    known: Evidence | None = None,
) -> Replay:
    """What `strategy` would have sent at each call of `trajectory`, measured. `recorder` is the
    summarizer the strategy was built with (its calls are counted); `known` the trajectory's
    `evidence`, when already computed for another strategy."""
    known = known or evidence(trajectory)
    previous: list[tuple[int, ...]] = []
    texts: dict[Message, str] = {}
    calls = []
    for i in trajectory.calls:
        made = len(recorder.calls) if recorder else 0
        sent = strategy(trajectory.messages[:i])
        summary_in, summary_out = summarizing_tokens(recorder.calls[made:] if recorder else (), tokens)
        current = [tokens.tokens(m) for m in sent]
        indices = {known.index_of[m] for m in sent if m in known.index_of}
        new = [texts.setdefault(m, render(m)) for m in sent if m not in known.index_of]

        def found(needle: str, indices: set[int] = indices, new: list[str] = new) -> bool:
            return not known.occurs[needle].isdisjoint(indices) or any(needle in text for text in new)

        def tally(needles: frozenset[str]) -> tuple[int, int]:
            return sum(map(found, needles)), len(needles)

        calls.append(
            Call(
                index=i,
                sent=sum(map(len, current)),
                cached=_common_prefix(previous, current),
                summary_in=summary_in,
                summary_out=summary_out,
                recall=tally(known.targets[i]),
                retained=tuple(tally(known.facts[i][kind]) for kind in KINDS),
            )
        )
        previous = current
    return Replay(trajectory=trajectory.name, strategy=strategy.name, calls=tuple(calls))


def floor(baseline: Replay, head: int, p: float) -> float:
    """What a strategy pays on a trajectory if it sends, at every call, the head (the system prompt and
    the task, `head` tokens) and the messages new since the previous call, and nothing else: the first
    call in full, then the new messages uncached and the head at the cache price `p`. It is the least
    a strategy that sends the task and each new message whole can pay, but for the few tokens a new
    message may share with the one it follows at the same place (its role's framing), which the
    token-level common prefix counts as cached. `baseline` is `none`'s replay: the uncached part of
    its calls is exactly what is new."""
    if not baseline.calls:
        return 0.0
    first, rest = baseline.calls[0], baseline.calls[1:]
    return first.sent + sum(c.sent - c.cached + p * head for c in rest)


# ---- over a corpus ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    """One strategy over a corpus; `cost` is relative to the baseline's (`none`) total at each price."""

    strategy: str
    trajectories: int
    calls: int
    cost: dict[float, float]
    recall: float
    mean_cumulative_input: float
    median_peak: float
    over: dict[int, float]
    retention: float
    retention_by_kind: dict[str, float]
    summarizing_tokens: int


def figures(replays: Sequence[Replay], baseline: Sequence[Replay]) -> Figures:
    """A strategy's replays over a corpus, against the baseline's replays of the same trajectories."""
    if not replays or sorted(r.trajectory for r in replays) != sorted(r.trajectory for r in baseline):
        raise ValueError("the strategy and the baseline must cover the same, non-empty, trajectories")
    calls = [c for r in replays for c in r.calls]
    nan = float("nan")
    return Figures(
        strategy=replays[0].strategy,
        trajectories=len(replays),
        calls=len(calls),
        cost={p: _ratio(sum(r.cost(p) for r in replays), sum(r.cost(p) for r in baseline)) for p in PRICES},
        recall=_or(_mean(r.recall for r in replays if r.recall is not None), nan),
        mean_cumulative_input=statistics.fmean(r.cumulative_input for r in replays),
        median_peak=statistics.median(r.peak for r in replays),
        over={n: _ratio(sum(c.sent > n for c in calls), len(calls)) for n in OVER},
        retention=_or(_mean(x for r in replays if (x := r.retention()) is not None), nan),
        retention_by_kind={
            kind: _or(_mean(x for r in replays if (x := r.retention(kind)) is not None), nan)
            for kind in KINDS
        },
        summarizing_tokens=sum(c.summary_in + c.summary_out for c in calls),
    )


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return statistics.fmean(values) if values else None


def _ratio(part: float, whole: float) -> float:
    return part / whole if whole else float("nan")


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


__all__ = [
    "IDENTIFIER",
    "KINDS",
    "OVER",
    "PRICES",
    "Call",
    "Evidence",
    "Figures",
    "Replay",
    "commands",
    "common_prefix",
    "edited_files",
    "evidence",
    "failure",
    "figures",
    "floor",
    "replay",
    "summarizing_tokens",
    "task_identifiers",
]
