"""The machinery of `bench/context_replay.py`: the compaction strategies replayed on real trajectories.

    trajectory.py  reading a recorded mini-swe-agent trajectory as hilbert `Message`s
    measure.py     the replay's fixed definitions (cost, recall, retention), the same for every strategy
    run.py         one trajectory file, every strategy (a worker process's job), and the whole corpus
    report.py      the table, the Gemini-usage calibration line and the default strategy's figures line

The definitions and the trajectory reader lived in `hilbert.context` until issue 12; only the benchmark
uses them, so they live beside it. It is a package, not `bench/*.py`, because every top-level bench
script has a smoke run.
"""
