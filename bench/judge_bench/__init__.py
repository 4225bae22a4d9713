"""The machinery of `bench/judge.py`: the judge benchmark on real PyPI projects.

    cases.py    the case data (projects, injected bugs, honest fixes, cheats) and how edits apply
    sdists.py   fetching and unpacking the pinned source distributions
    measure.py  building each case's git repository, running verify, the held-out tests and the gate
    report.py   rates per technique, the tables (text and Markdown) and the figures line

It lives in a package, not in `bench/*.py`, because every top-level bench script has a smoke run.
"""
