"""The `lead` policy of the fake server: a simulated lead that plans a sample project (see
`hilbert.testing.sample`) through the planning tools of `hilbert.fleet.lead_tools`.

    policy = LeadPolicy.from_options({"final": "true"}, seed=0)
    reply = policy.reply(conversation)

`procedure.py` is how it plans (run the tests, find the function each failing test calls, write_plan
with one task per function, finish); `policy.py` replays that procedure from the conversation on
every request.
"""

from hilbert.testing.lead.policy import LeadPolicy

__all__ = ["LeadPolicy"]
