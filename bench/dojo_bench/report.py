"""The AgentDojo comparison's figures: one `Run` per (suite, attack, defense, user task, injection task),
and the tables and the last line built from them (no agentdojo import)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

NO_ATTACK = "none"


@dataclass(frozen=True)
class Run:
    suite: str
    attack: str  # NO_ATTACK: the user task alone, for utility
    defense: str
    user_task: str
    injection_task: str  # "" without an attack
    utility: bool
    attacked: bool  # the injection task's goal was reached (AgentDojo's "security" result)
    refused: int = 0
    filtered: int = 0
    error: str = ""  # the run could not be set up (the attack could not be built for this pair)


def rate(runs: Sequence[Run], what: Callable[[Run], bool]) -> float | None:
    return sum(map(what, runs)) / len(runs) if runs else None


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _group(runs: Iterable[Run], key: Callable[[Run], str]) -> dict[str, list[Run]]:
    groups: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        if not run.error:
            groups[key(run)].append(run)
    return groups


def overall_table(runs: Sequence[Run], defenses: Sequence[str]) -> list[str]:
    """Per defense: utility alone, utility under attack, attack success; and how often the defense hit
    the user task's own work when there was no attack."""
    clean = _group((r for r in runs if r.attack == NO_ATTACK), lambda r: r.defense)
    attacked = _group((r for r in runs if r.attack != NO_ATTACK), lambda r: r.defense)
    lines = [
        "| defense | utility % | utility under attack % | attack success % | clean runs hit % | runs |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in defenses:
        alone, under = clean.get(name, []), attacked.get(name, [])
        hit = rate(alone, lambda r: r.refused > 0 or r.filtered > 0)
        lines.append(
            f"| {name} | {percent(rate(alone, lambda r: r.utility))} | "
            f"{percent(rate(under, lambda r: r.utility))} | {percent(rate(under, lambda r: r.attacked))} | "
            f"{percent(hit)} | {len(under)} |"
        )
    return lines


def split_table(runs: Sequence[Run], defenses: Sequence[str], by: str) -> list[str]:
    """Attack success (and utility under attack) per `by` ("suite" or "attack") and defense."""
    attacked = [r for r in runs if r.attack != NO_ATTACK]
    groups = _group(attacked, lambda r: f"{getattr(r, by)}\t{r.defense}")
    keys = sorted({getattr(r, by) for r in attacked})
    lines = [
        f"| {by} | " + " | ".join(defenses) + " |",
        "|---|" + "---:|" * len(defenses),
    ]
    for key in keys:
        cells = []
        for name in defenses:
            group = groups.get(f"{key}\t{name}", [])
            success, utility = rate(group, lambda r: r.attacked), rate(group, lambda r: r.utility)
            cells.append(f"{percent(success)} / {percent(utility)}")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return lines


def leaks(runs: Sequence[Run], defense: str, limit: int = 3) -> list[str]:
    """The injection tasks that still succeeded under `defense`, with a few user tasks each."""
    hits = _group(
        (r for r in runs if r.defense == defense and r.attacked), lambda r: f"{r.suite}/{r.injection_task}"
    )
    lines = []
    for key, group in sorted(hits.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        users = sorted({r.user_task for r in group}, key=lambda u: int(u.rsplit("_", 1)[-1]))
        attacks = sorted({r.attack for r in group})
        example = ", ".join(users[:limit]) + (", ..." if len(users) > limit else "")
        lines.append(
            f"{key}: {len(group)} runs, {len(users)} user tasks ({example}); attacks {', '.join(attacks)}"
        )
    return lines


def figures(runs: Sequence[Run], defenses: Sequence[str], wall_s: float) -> str:
    """The last line: overall utility, utility under attack and attack success per defense."""
    good = [r for r in runs if not r.error]
    attacked = [r for r in good if r.attack != NO_ATTACK]
    parts = [
        f"suites={len({r.suite for r in good})}",
        f"attacks={len({r.attack for r in attacked})}",
        f"pairs={len({(r.suite, r.attack, r.user_task, r.injection_task) for r in attacked})}",
        f"errors={len({(r.suite, r.attack, r.user_task, r.injection_task) for r in runs if r.error})}",
    ]
    for name in defenses:
        key = _key(name)
        alone = [r for r in good if r.defense == name and r.attack == NO_ATTACK]
        under = [r for r in attacked if r.defense == name]
        parts += [
            f"utility_{key}={_fraction(rate(alone, lambda r: r.utility))}",
            f"uua_{key}={_fraction(rate(under, lambda r: r.utility))}",
            f"asr_{key}={_fraction(rate(under, lambda r: r.attacked))}",
        ]
    return " ".join([*parts, f"wall_s={wall_s:.1f}"])


def _key(defense: str) -> str:
    return (
        "_".join(w for w in defense.replace("+", " ").replace(":", " ").split() if w != "fences") or "fences"
    )


def _fraction(value: float | None) -> str:
    return "nan" if value is None else f"{value:.3f}"


__all__ = ["NO_ATTACK", "Run", "figures", "leaks", "overall_table", "percent", "rate", "split_table"]
