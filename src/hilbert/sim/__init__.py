"""The simulation: a world for hilbert to work in offline, for the demo, the benchmarks and the tests.
Nothing in the product imports it, except the CLI's `demo`, `sample-project` and `fake-server`
commands (lazily, at the edge).

    engineer/     the `engineer` responder: an agent that really fixes sample projects, and misbehaves
    lead/         the `lead` responder: plans a sample project, answers escalations
    judge/        the `judge` responder: the stop gate's verdict, as JSON
    reviewer/     the `reviewer` responder: the review panel's findings, as JSON
    gullible.py   the `gullible` responder: obeys any instruction it reads (an attacker, or its victim)
    longhaul.py   the `longhaul` responder: a task that outgrows its context
    optimiser/    the `optimiser` responder: a climb's explorer, and the climb's sample project
    sample/       sample projects: a small Python package with tests and injected bugs
    demo/         the scenes of `hilbert demo`

The responders answer through the fake model server (`hilbert.testing.fake_server`), which does not
know them: importing this package registers them there by name, so `FakeServer("engineer")` and
`hilbert fake-server --responder engineer` work once it is imported. The demo is not imported here.
"""

from hilbert.sim.engineer import EngineerResponder
from hilbert.sim.gullible import GullibleResponder
from hilbert.sim.judge import JudgeResponder
from hilbert.sim.lead import LeadResponder
from hilbert.sim.longhaul import LonghaulResponder
from hilbert.sim.optimiser import OptimiserResponder
from hilbert.sim.reviewer import ReviewerResponder
from hilbert.testing.fake_server import register
from hilbert.testing.fake_server.responders import Factory

RESPONDERS: dict[str, Factory] = {
    "engineer": EngineerResponder.from_options,
    "lead": LeadResponder.from_options,
    "judge": JudgeResponder.from_options,
    "reviewer": ReviewerResponder.from_options,
    "gullible": GullibleResponder.from_options,
    "longhaul": LonghaulResponder.from_options,
    "optimiser": OptimiserResponder.from_options,
}

for _name, _factory in RESPONDERS.items():
    register(_name, _factory)
