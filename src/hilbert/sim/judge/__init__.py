"""The `judge` responder of the fake server: a simulated judge model for the stop gate (see
`hilbert.judge.verdict`). It reads the prompt the gate builds and answers a JSON verdict.

    responder = JudgeResponder.from_options({"gullible": "true"}, seed=0)
"""

from hilbert.sim.judge.responder import JudgeResponder

__all__ = ["JudgeResponder"]
