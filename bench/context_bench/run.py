"""Replaying every strategy on each trajectory file, in worker processes.

One file is one job: it is loaded once, its strategy-independent evidence (recall targets, must-keep
facts) computed once, and one `TokenCache` shared by all its strategies (they count the same
messages). Each strategy gets a fresh `RecordingSummarizer(ExtractiveSummarizer())`, so a summary
strategy's summarizing calls are counted per trajectory. The job also returns what the server
reported, for the calibration line.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from hilbert.context.render import TokenCache, render
from hilbert.context.strategies import strategy_named
from hilbert.context.summarize import ExtractiveSummarizer, RecordingSummarizer
from hilbert.context.tokens import openai_encoding

from .measure import Replay, evidence, replay
from .trajectory import load_trajectory


@dataclass(frozen=True)
class FileResult:
    """One trajectory: each strategy's replay (by strategy name, in the order asked), and for the
    calls whose usage was reported, the reported prompt tokens and our count of the same context
    (`none`'s sent tokens); `sample` is one (rendered context, reported prompt tokens) pair."""

    path: Path
    name: str
    messages: int
    replays: dict[str, Replay]
    head_tokens: int  # the system prompt and the task
    reported_tokens: int
    counted_tokens: int
    sample: tuple[str, int] | None
    seconds: float


def measure_file(path: Path, specs: Sequence[str], tokenizer: str, sample: bool) -> FileResult:
    """Every strategy in `specs` replayed on the trajectory in `path`; `sample`: also return the
    last reported call's context as a calibration sample."""
    started = time.monotonic()
    trajectory = load_trajectory(path)
    tokens = TokenCache(openai_encoding(tokenizer))
    known = evidence(trajectory)
    replays: dict[str, Replay] = {}
    for spec in specs:
        recorder = RecordingSummarizer(ExtractiveSummarizer())
        strategy = strategy_named(spec, tokens=tokens, summarizer=recorder)
        replays[strategy.name] = replay(trajectory, strategy, tokens, recorder=recorder, known=known)
    reported = [(i, u.prompt_tokens) for i, u in enumerate(trajectory.usage) if u and u.prompt_tokens > 0]
    last = reported[-1] if sample and reported else None
    return FileResult(
        path=path,
        name=trajectory.name,
        messages=len(trajectory.messages),
        replays=replays,
        head_tokens=tokens.total(trajectory.messages[:2]),
        reported_tokens=sum(n for _, n in reported),
        counted_tokens=sum(tokens.total(trajectory.messages[:i]) for i, _ in reported),
        sample=("\n".join(map(render, trajectory.messages[: last[0]])), last[1]) if last else None,
        seconds=time.monotonic() - started,
    )


def measure_corpus(
    paths: Sequence[Path],
    specs: Sequence[str],
    tokenizer: str,
    *,
    jobs: int,
    samples: int,
    progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> list[FileResult]:
    """Every file, `jobs` at a time (largest first, so the long ones do not finish last), in the
    order of `paths`; `samples` files, spread evenly, give a calibration sample."""
    step = max(1, -(-len(paths) // samples)) if samples else 0
    sampled = {p for n, p in enumerate(paths) if step and n % step == 0}
    order = sorted(paths, key=lambda p: p.stat().st_size, reverse=True)
    results: dict[Path, FileResult] = {}

    def done(result: FileResult) -> None:
        results[result.path] = result
        progress(
            f"[{len(results)}/{len(paths)}] {result.name}: {result.messages} messages, {result.seconds:.1f}s"
        )

    if jobs == 1:
        for path in order:
            done(measure_file(path, specs, tokenizer, path in sampled))
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(measure_file, p, specs, tokenizer, p in sampled) for p in order]
            for future in as_completed(futures):
                done(future.result())
    return [results[p] for p in paths]
