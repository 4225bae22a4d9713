"""The `lead` responder of the fake server: a simulated lead that plans a sample project (see
`hilbert.sim.sample`) through the planning tools of `hilbert.fleet.lead_tools`.

    responder = LeadResponder.from_options({"final": "true"}, seed=0)
    reply = responder.reply(conversation)

`procedure.py` is how it plans (run the tests, find the function each failing test calls, write_plan
with one task per function, finish); `responder.py` replays that procedure from the conversation on
every request.
"""

from hilbert.sim.lead.responder import LeadResponder

__all__ = ["LeadResponder"]
