"""The `engineer` responder of the fake model server: a scripted agent that really solves sample
projects (see `hilbert.sim.sample`) through whatever tools a request offers, and that can be
told to misbehave like real agents do (stop early, cheat, idle, ignore reminders).

    responder = EngineerResponder.from_options({"cheat_skip": "0.3"}, seed=7)
    reply = responder.reply(conversation)

Layout: `work.py` is how it works (the procedure), `locating.py` how it finds what a failing test
exercises, `tracing.py` which lines it ran, `desk.py` its memory and basic moves, `memory.py` what
it still sees after a cut, `reading.py` how it reads tool output, `repairs.py` and `cheats.py` the
edits it tries, `quirks.py` its options, `dialects/` the tool sets it speaks, `responder.py` the
stateless replay, and `harness.py` a small in-process driver that runs any responder on a real
directory.
"""

from hilbert.sim.engineer.quirks import BEHAVIOURS, EngineerOptions, Quirks
from hilbert.sim.engineer.responder import EngineerResponder

__all__ = ["BEHAVIOURS", "EngineerOptions", "EngineerResponder", "Quirks"]
