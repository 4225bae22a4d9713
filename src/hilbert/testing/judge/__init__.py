"""The `judge` policy of the fake server: a simulated judge model for the stop gate (see
`hilbert.judge.verdict`). It reads the prompt the gate builds and answers a JSON verdict.

    policy = JudgePolicy.from_options({"gullible": "true"}, seed=0)
"""

from hilbert.testing.judge.policy import JudgePolicy

__all__ = ["JudgePolicy"]
