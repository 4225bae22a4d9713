"""Test only: crash points. The orchestrator kills itself (SIGKILL, like the OOM killer) at a point the
log defines, so that resume can be tested at every kind of moment and a seed always reproduces a kill.

`HILBERT_CRASH_AT` (read at the CLI edge only, never inside the fleet) holds comma-separated entries:

    KIND:K          after the K-th event of KIND this process committed (any agent's: `model_call:7`)
    point:NAME:K    the K-th time the code passes the named point NAME (`point:after_ref_moved:1`)

Named points: `after_landing_logged` (the merge queue logged its intent, the ref has not moved),
`after_ref_moved` (the ref moved, `merged` not yet logged). Other moments are events: mid-bisection is
`merge_bisect:K`, a verdict whose candidate is not fetched yet is `gate_verdict:K`, a lead session with
a pending proposal is `proposal_held:K`. Before dying it writes a `crash_point` event saying where.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Mapping

from hilbert.errors import UserError
from hilbert.store.event_store import Event, EventStore

ENV = "HILBERT_CRASH_AT"


class Crashes:
    def __init__(self, spec: str = "") -> None:
        self.kinds: dict[str, int] = {}
        self.points: dict[str, int] = {}
        for entry in filter(None, (part.strip() for part in spec.split(","))):
            parts = entry.split(":")
            try:
                if parts[0] == "point" and len(parts) == 3:
                    self.points[parts[1]] = int(parts[2])
                elif len(parts) == 2:
                    self.kinds[parts[0]] = int(parts[1])
                else:
                    raise ValueError(entry)
            except ValueError:
                raise UserError(f"{ENV}: cannot read {entry!r}", hint="KIND:K or point:NAME:K") from None
        self.seen: Counter[str] = Counter()
        self.store: EventStore | None = None
        self.run = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Crashes:
        return cls(env.get(ENV, ""))

    @property
    def armed(self) -> bool:
        return bool(self.kinds or self.points)

    def watch(self, store: EventStore, run: str) -> None:
        """Count every event this process commits to `store` (the fleet's and its agents')."""
        self.store, self.run = store, run
        if self.kinds:
            store.observe(self.after)

    def after(self, event: Event) -> None:
        self.seen[event.kind] += 1
        if self.kinds.get(event.kind) == self.seen[event.kind]:
            self._die(f"{event.kind}:{self.seen[event.kind]}")

    def at(self, point: str) -> None:
        key = f"point:{point}"
        self.seen[key] += 1
        if self.points.get(point) == self.seen[key]:
            self._die(f"{key}:{self.seen[key]}")

    def _die(self, where: str) -> None:
        if self.store is not None:
            self.store.observe(None)
            self.store.append(self.run, "harness", "crash_point", {"point": where})
        os.kill(os.getpid(), signal.SIGKILL)
