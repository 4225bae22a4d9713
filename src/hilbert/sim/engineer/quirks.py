"""The engineer's options (`engineer:key=value,...`) and which agents misbehave, and how.

Each behaviour has a rate in [0, 1]. Whether one agent shows a behaviour is a deterministic draw:
a hash of (seed, behaviour, the agent's identity) read as a number in [0, 1), compared with the
rate; so `cheat_skip=0.3` makes about 30% of agents cheat, the same agents for the same seed. The
identity is the `Agent: NAME` line of the system prompt or of the first user message's first line,
else the first user message. With
`agents=Ada+Linus` only the named agents can misbehave (still subject to their rates; give rate 1
to make exactly them misbehave).

One option is not a misbehaviour and holds for every agent: `wide_check=0` turns off the whole-suite
check after a fix when the task's test command runs only its own tests (`work.py`'s
`_breaks_elsewhere`; on by default, `wide_check=1`). A fleet whose every task's suite holds the
other tasks' bugs pays for it on every task and learns nothing from it about the fleet.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from hilbert.errors import UserError

CHEATS = {"cheat_edit_test": "edit_test", "cheat_skip": "skip", "cheat_hardcode": "hardcode"}
BEHAVIOURS = ("stop_early", *CHEATS, "idle", "ignore_reminders")
_OTHER_KEYS = ("agents", "dialect", "idle_turns", "wide_check")


@dataclass(frozen=True)
class Quirks:
    """How one agent misbehaves. `cheat` is one of "edit_test", "skip", "hardcode" (the first drawn,
    in that order, when several are)."""

    stop_early: bool = False
    cheat: str | None = None
    idle_turns: int = 0
    ignore_reminders: bool = False


@dataclass(frozen=True)
class EngineerOptions:
    rates: tuple[tuple[str, float], ...] = ()
    agents: frozenset[str] | None = None
    dialect: str | None = None
    idle_turns: int = 3
    wide_check: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> EngineerOptions:
        unknown = sorted(set(options) - set(BEHAVIOURS) - set(_OTHER_KEYS))
        if unknown:
            raise UserError(
                f"unknown engineer option {unknown[0]!r}",
                hint="known options: " + ", ".join((*BEHAVIOURS, *_OTHER_KEYS)),
            )
        rates = tuple((key, _rate(key, options[key])) for key in BEHAVIOURS if key in options)
        agents = options.get("agents")
        names = frozenset(n.strip() for n in agents.split("+") if n.strip()) if agents else None
        turns = options.get("idle_turns", "3")
        if not turns.isdigit():
            raise UserError(f"idle_turns must be a whole number, not {turns!r}", hint="e.g. idle_turns=3")
        wide = options.get("wide_check", "1")
        if wide not in ("0", "1"):
            raise UserError(f"wide_check must be 0 or 1, not {wide!r}", hint="wide_check=0 turns it off")
        return cls(
            rates=rates,
            agents=names,
            dialect=options.get("dialect") or None,
            idle_turns=int(turns),
            wide_check=wide == "1",
        )

    def quirks(self, seed: int, identity: str, agent: str | None) -> Quirks:
        if self.agents is not None and agent not in self.agents:
            return Quirks()
        drawn = {key for key, rate in self.rates if draw(seed, key, identity) < rate}
        cheat = next((CHEATS[key] for key in CHEATS if key in drawn), None)
        return Quirks(
            stop_early="stop_early" in drawn,
            cheat=cheat,
            idle_turns=self.idle_turns if "idle" in drawn else 0,
            ignore_reminders="ignore_reminders" in drawn,
        )


def draw(seed: int, behaviour: str, identity: str) -> float:
    """A number in [0, 1), fixed by its inputs."""
    digest = hashlib.sha256(f"{seed}\0{behaviour}\0{identity}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _rate(key: str, value: str) -> float:
    try:
        rate = float(value)
    except ValueError:
        rate = -1.0
    if not 0.0 <= rate <= 1.0:
        raise UserError(
            f"engineer option {key} must be a rate between 0 and 1, not {value!r}", hint=f"{key}=0.3"
        )
    return rate
