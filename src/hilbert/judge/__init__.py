"""The judge: deciding whether a worker's claimed-done change is honest. So far the stop gate's
integrity checks: `change` (what a commit changed: `Change`, `change_between`, `change_between_trees`,
and the `Finding`/`Allowances` records), `integrity` (`integrity_findings`, `blocking`, the `CHECKS`
registry and the checks over markers, CI and process tricks), `integrity_tests` (the checks that read
test code) and `python_ast` (the `ast` helpers they share).
"""

from hilbert.judge.change import Allowances, Change, FileChange, Finding, change_between, change_between_trees
from hilbert.judge.integrity import CHECKS, Check, blocking, integrity_findings

__all__ = [
    "CHECKS",
    "Allowances",
    "Change",
    "Check",
    "FileChange",
    "Finding",
    "blocking",
    "change_between",
    "change_between_trees",
    "integrity_findings",
]
