"""The whole suite's conftest. Its first job: being here, without an `__init__.py`, it puts `tests/` on
`sys.path` (pytest's default "prepend" import mode), so a support module at this level
(`git_support`) can be imported by the tests of every folder, as each folder's own `*_support`
module is by its tests.

Its second: importing `hilbert.sim` registers the simulation's responders with the fake server, so
every test may name them (`FakeServer("engineer")`, `FakeServer("judge")`) whatever else it imports."""

import hilbert.sim  # noqa: F401
