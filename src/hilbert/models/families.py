"""Which family a model belongs to, so that "a model of a different family" means something.

Two models of one family share training data and habits, so their errors correlate: the judge and a
review panel are independent of a worker only across families. A model's family is its provider
prefix (`anthropic:` → anthropic; `openai:` and `openai-responses:` → openai), unless the person
says otherwise with a `families` table, keyed by the model's `provider:name` (or by a `provider:*`
glob). That is how an OpenAI-compatible endpoint serving Qwen counts as qwen, and how two endpoints
of one family never count as independent:

    [families]
    "openai:qwen3-coder" = "qwen"
    "openai:deepseek-*" = "deepseek"
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence

from hilbert.errors import UserError
from hilbert.models.names import ModelSpec, parse_model_name

_PROVIDER_FAMILY = {"anthropic": "anthropic", "openai": "openai", "openai-responses": "openai"}


def family_of(model: ModelSpec | str, families: Mapping[str, str] | None = None) -> str:
    """The family of `model`: the first `families` entry matching its `provider:name` (exact, then
    glob, in the table's order), else its provider's family."""
    spec = model if isinstance(model, ModelSpec) else parse_model_name(model)
    table = families or {}
    label = spec.label
    if label in table:
        return table[label].strip().lower()
    for pattern, family in table.items():
        if fnmatch.fnmatchcase(label, pattern):
            return family.strip().lower()
    return _PROVIDER_FAMILY[spec.provider]


def other_family(
    worker: ModelSpec | str, candidates: Sequence[str], families: Mapping[str, str] | None = None
) -> str:
    """The first of `candidates` whose family differs from `worker`'s; a `UserError` naming the
    families when none does (a judge of the worker's own family is not independent)."""
    own = family_of(worker, families)
    for candidate in candidates:
        if family_of(candidate, families) != own:
            return candidate
    seen = ", ".join(f"{c} ({family_of(c, families)})" for c in candidates) or "none"
    raise UserError(
        f"no model of a family other than {own!r} to judge {worker}: candidates {seen}",
        hint="name a judge model of another family, or map an endpoint to its family under [families]",
    )


__all__ = ["family_of", "other_family"]
