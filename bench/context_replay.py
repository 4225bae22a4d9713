"""What each context strategy would cost and keep, replayed on real agent trajectories, with no model.

    python bench/context_replay.py                         # the whole corpus, every strategy of SPECS
    python bench/context_replay.py --limit 20 --strategies none,mask:10,10,hybrid:10,10,32000
    python bench/context_replay.py --corpus path/to/trajectories --jobs 2

The corpus (default `../shared/corpus` beside the repository) holds mini-swe-agent trajectories
(`*.traj.json[.gz]`). At every model call of every trajectory, each strategy decides what it would
have sent (the context: the messages before that assistant turn), and `context_bench/measure.py`'s
fixed definitions (docs/design/context.md) score it: cache-aware cost relative to `none` at cache-read
prices p = 0.1, 0.25, 0.5, 1.0; next-step recall; mean cumulative input tokens; median peak context;
the share of calls over 16k / 32k tokens; retention of must-keep facts. A second table, by trajectory
length, sets the default's cost at p = 0.1 beside the floor: the least any strategy that sends the task
and each new message whole can pay (`context_bench.measure.floor`). Tokens are counted with one
ruler for every strategy (`--tokenizer`, default o200k_base). `none` and the default strategy
(`hilbert.context.strategies.DEFAULT`) are always measured.

Prints the calibration of the approximate tokenizer against the usage the corpus's server reported,
the table (Markdown), and last the default strategy's figures as key=value pairs:

    strategy=... trajectories=.. calls=.. cost_p0.1=.. cost_p0.25=.. cost_p0.5=.. cost_p1.0=.. recall=..
    mean_cumulative_input=.. median_peak=.. over_16k=.. over_32k=.. retention=.. retention_files=..
    retention_failure=.. retention_task=.. summarizing_tokens=.. wall_s=..

Progress goes to stderr. Exit 2 with one line on bad input (a malformed trajectory, a bad spec).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from context_bench.measure import figures
from context_bench.report import by_length, calibration, figures_line, table
from context_bench.run import measure_corpus
from context_bench.trajectory import find_trajectories
from hilbert.context import strategies
from hilbert.context.render import TokenCache
from hilbert.context.summarize import ExtractiveSummarizer
from hilbert.context.tokens import openai_encoding
from hilbert.errors import HilbertError, UserError

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
SAMPLES = 12  # trajectories whose last call calibrates the approximate tokenizer (its fit is serial)


def specs_to_run(asked: list[str], tokenizer: str) -> tuple[list[str], str]:
    """The specs to replay (`none` first, the default included, no duplicates by name) and the
    default's name; a `UserError` for a bad spec before any work starts."""
    tokens = TokenCache(openai_encoding(tokenizer))

    def name(spec: str) -> str:
        return str(strategies.strategy_named(spec, tokens=tokens, summarizer=ExtractiveSummarizer()).name)

    chosen: dict[str, str] = {}
    for spec in ["none", *asked, strategies.DEFAULT]:
        chosen.setdefault(name(spec), spec)
    return list(chosen.values()), name(strategies.DEFAULT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="a folder of trajectories, or one file")
    parser.add_argument(
        "--strategies", default=",".join(strategies.SPECS), help="specs separated by commas or spaces"
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N trajectories (by path)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--tokenizer", default="o200k_base", help="the OpenAI encoding every count uses")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        if (args.limit is not None and args.limit < 1) or args.jobs < 1:
            raise UserError("--limit and --jobs must be at least 1", hint="e.g. --limit 20 --jobs 2")
        asked = _split_specs(args.strategies)
        specs, default = specs_to_run(asked, args.tokenizer)
        paths = list(find_trajectories(args.corpus))[: args.limit]
        if not paths:
            raise UserError(f"no *.traj.json[.gz] under {args.corpus}", hint="give --corpus DIR")
        results = measure_corpus(paths, specs, args.tokenizer, jobs=args.jobs, samples=SAMPLES)
    except HilbertError as err:
        print(f"context replay: {err}", file=sys.stderr)
        return 2
    names = list(results[0].replays)
    baseline = [r.replays["none"] for r in results]
    rows = [figures([r.replays[name] for r in results], baseline) for name in names]
    print(calibration(results, args.tokenizer))
    print(f"{len(results)} trajectories, {rows[0].calls} model calls, tokens counted with {args.tokenizer}")
    print()
    print("\n".join(table(rows)))
    print()
    print("\n".join(by_length(results, default)))
    print()
    print(figures_line(rows[names.index(default)], time.monotonic() - started))
    return 0


def _split_specs(text: str) -> list[str]:
    """Specs from `--strategies`: `mask:10,10,hybrid:10,10,32000` splits before each `kind:` or `none`."""
    words = [w for w in text.replace(" ", ",").split(",") if w]
    specs: list[str] = []
    for word in words:
        if ":" in word or word == "none" or not specs:
            specs.append(word)
        else:
            specs[-1] += "," + word
    return specs


if __name__ == "__main__":
    sys.exit(main())
