"""The machinery of `bench/first_run.py`: a person's first real run on real libraries with seeded bugs.

    sites.py    where the bugs go: seeded mutation sites over a project's product lines, checked by
                the suite, and how they are applied

It lives in a package, not in `bench/*.py`, because every top-level bench script has a smoke run.
"""
