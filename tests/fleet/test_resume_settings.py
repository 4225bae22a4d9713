"""A resume goes on with the run's own settings unless the person sets them again: the project's test
command (the merge queue's checks) and the workers' context strategy included."""

from __future__ import annotations

from hilbert.fleet.context import Models
from hilbert.fleet.setup import inherit, resumable
from hilbert.models import make_model
from hilbert.settings import Settings


def test_a_resume_keeps_the_runs_test_command_and_context_unless_set_again() -> None:
    model = make_model("openai:fake@http://127.0.0.1:9/v1", env={})
    started = Settings.of({"commands.test": "make check", "context.strategy": "none", "fleet.workers": 8})
    recorded = resumable(started, Models(model))
    resumed = inherit(Settings.of({}), recorded)
    assert (resumed.commands.test, resumed.context.strategy, resumed.fleet.workers) == (
        "make check",
        "none",
        8,
    )
    changed = inherit(Settings.of({"commands.test": "pytest -x"}, source="--test-command"), recorded)
    assert changed.commands.test == "pytest -x" and changed.context.strategy == "none"
