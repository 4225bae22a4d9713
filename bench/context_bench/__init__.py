"""The machinery of `bench/context_replay.py`: the compaction strategies replayed on real trajectories.

    run.py     one trajectory file, every strategy (a worker process's job), and the whole corpus
    report.py  the table, the Gemini-usage calibration line and the default strategy's figures line

The definitions themselves (cost, recall, retention) are `hilbert.context.measure`'s, so any tool can
measure a strategy the same way. It lives in a package, not in `bench/*.py`, because every top-level
bench script has a smoke run.
"""
