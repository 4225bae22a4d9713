"""What the gate keeps of runs at base: `Result`, `Reference`, and `RunCache`, the folder they are kept in.

A `Result` is what a run left for comparison (its exit status was 0, and the outcomes the reporter
gathered); a `Reference` is the base's collection of one command and its pytest options, which every
run at head is given (`Reference.controls`). `RunCache` keeps their JSON in a folder per key (the base
tree, the command, the held-out tests' contents, every parameter of the perturbation), so many gate
calls on one base pay for a run once: only a run that `finished` is written (not one that timed out,
was killed by a signal, was refused or could not start its program: none of those is a fact about the
base), and an entry read back that does not have the shape `to_json` writes is ignored and made again.
Nothing here runs a command.
"""

from __future__ import annotations

import hashlib
import json
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hilbert.commands import Ran
from hilbert.judge.pytest_config import compose_ini
from hilbert.judge.testruns import Controls, Outcomes

EXIT = "(exit status)"  # the one "test" of a command that starts no pytest
NOT_STARTED = (126, 127)  # bash: the program cannot run, or is not there (a tool missing here today)


@dataclass(frozen=True)
class Result:
    """What a run left for comparison: its exit status was 0, and the outcomes (None: no pytest)."""

    ok: bool
    outcomes: Outcomes | None

    def table(self) -> dict[str, str]:
        """Outcome per node id; a command without pytest has one entry, its exit status; records the
        judge cannot trust (`Outcomes.untrusted`) count as none."""
        if self.outcomes is None:
            return {EXIT: "passed" if self.ok else "failed"}
        return {} if self.outcomes.untrusted else dict(self.outcomes.outcomes)

    def to_json(self) -> dict[str, object]:
        return {"ok": self.ok, "outcomes": None if self.outcomes is None else self.outcomes.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Result:
        outcomes = data.get("outcomes")
        return cls(bool(data["ok"]), Outcomes.from_json(outcomes) if isinstance(outcomes, dict) else None)

    @staticmethod
    def valid(data: Mapping[str, object]) -> bool:
        """Whether `data` (a cache entry) has the shape `to_json` writes."""
        return isinstance(data.get("ok"), bool) and _valid_outcomes(data.get("outcomes"))


@dataclass(frozen=True)
class Reference:
    """The base's reference for one command: its collection there and its pytest options."""

    outcomes: Outcomes | None
    options: dict[str, str | list[str]]
    where: str  # the ini file's folder, relative to the tree
    unfinished: str = ""  # the run's status when it did not finish (timed out, killed): not cached

    def to_json(self) -> dict[str, object]:
        outcomes = None if self.outcomes is None else self.outcomes.to_json()
        return {"outcomes": outcomes, "options": self.options, "where": self.where}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Reference:
        outcomes, options = data.get("outcomes"), data.get("options")
        return cls(
            Outcomes.from_json(outcomes) if isinstance(outcomes, dict) else None,
            dict(options) if isinstance(options, dict) else {},
            str(data.get("where") or "."),
        )

    @staticmethod
    def valid(data: Mapping[str, object]) -> bool:
        """Whether `data` (a cache entry) has the shape `to_json` writes."""
        options = data.get("options")
        return (
            _valid_outcomes(data.get("outcomes"))
            and isinstance(data.get("where"), str)
            and isinstance(options, dict)
            and all(isinstance(v, str) or _strings(v) for v in options.values())
        )

    @property
    def imposed(self) -> bool:
        """Whether runs at head get the base's configuration: not when the base's sessions ran under
        different rootdirs or ini files (`pytest a && cd sub && pytest`), one ini cannot stand for all."""
        return self.outcomes is not None and self.outcomes.one_config

    def controls(self, head_tree: Path) -> Controls:
        if self.outcomes is None:
            return Controls()
        if not self.imposed:  # each session keeps its own configuration; the plugins are still the base's
            return Controls(plugins=self.outcomes.plugins)
        ini = compose_ini(self.options, self.where, head_tree)
        return Controls(ini=ini, rootdir=self.outcomes.rootdir or ".", plugins=self.outcomes.plugins)


class RunCache:
    """JSON per key in `folder` (None: kept for this gate call only), and for this gate call in memory:
    a run that did not finish is not written, nor run twice in one call."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.memo: dict[str, dict[str, object]] = {}

    async def get(
        self,
        key: Sequence[str],
        make: Callable[[], Awaitable[tuple[dict[str, object], bool]]],
        valid: Callable[[dict[str, object]], bool],
    ) -> dict[str, object]:
        """The JSON kept under `key`, if it is `valid`; else `make()`'s, written when `make` says its
        run finished."""
        digest = hashlib.sha256(json.dumps(list(key)).encode()).hexdigest()[:32]
        if digest in self.memo:
            return self.memo[digest]
        path = self.folder / f"{digest}.json" if self.folder else None
        if path is not None and path.is_file():
            try:
                found = json.loads(path.read_text())
            except (OSError, ValueError):
                found = None
            if isinstance(found, dict) and valid(found):
                self.memo[digest] = found
                return found
        value, done = await make()
        self.memo[digest] = value
        if path is not None and done:
            path.parent.mkdir(parents=True, exist_ok=True)
            part = path.with_suffix(f".{id(value)}.part")
            part.write_text(json.dumps(value))
            part.replace(path)
        return value


def folder_digest(folder: Path | None) -> str:
    """A digest of the files under `folder` (their paths and bytes; "" for none): the held-out tests
    as a cache key, so that tests changed in place are run again and the same tests anywhere are not."""
    if folder is None:
        return ""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def finished(ran: Ran) -> bool:
    """Whether a command ran to its end: not refused, not past its timeout, not killed by a signal,
    and its program was there to start (a run that did not is no fact about the base to keep)."""
    code = ran.exit_code
    if ran.refused is not None or code is None or code < 0 or code in NOT_STARTED:
        return False
    return code - 128 not in (signal.SIGKILL, signal.SIGXCPU)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _valid_outcomes(data: object) -> bool:
    """Whether `data` is None or has the shape `Outcomes.to_json` writes."""
    if data is None:
        return True
    if not isinstance(data, dict):
        return False
    outcomes = data.get("outcomes")
    return (
        _strings(data.get("collected"))
        and isinstance(outcomes, dict)
        and all(isinstance(v, str) for v in outcomes.values())
        and isinstance(data.get("finished"), bool)
        and type(data.get("sessions")) is int
        and all(data.get(k) is None or isinstance(data.get(k), str) for k in ("rootdir", "inifile"))
        and _strings(data.get("plugins", []))
    )


__all__ = ["EXIT", "NOT_STARTED", "Reference", "Result", "RunCache", "finished", "folder_digest"]
