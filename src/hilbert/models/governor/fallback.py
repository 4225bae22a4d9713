"""Fallback chains per role (`[governor.fallback] worker = ["a", "b"]`): checked at the start of a run,
and a `Model` that tries them in turn.

A chain may never reach the family of the judge or of a reviewer: a worker that fell back to the
judge's family would be judged by its own kind (see `families.py`). `check_fallbacks` refuses such a
chain, an unknown role or a bad model name in one line, before anything is spent.

`FallbackModel.complete` asks the first model; when a call fails for good with an error that another
model may not share (its retries exhausted, a provider down: `ModelError` but not a refusal or an
overflow, which are the request's own) it asks the next one, and raises the last error if none answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hilbert.errors import ContextOverflowError, ModelError, RefusedError, UserError
from hilbert.models.families import family_of
from hilbert.models.names import parse_model_name
from hilbert.models.types import Completion, Message, Model, TextCallback, ToolSpec

ROLES = ("worker", "lead")
_HINT = (
    "fallback chains are [governor.fallback] worker = [...] or lead = [...],"
    " never of the judge's or the reviewers' family"
)


def check_fallbacks(
    chains: Mapping[str, Sequence[str]],
    *,
    judge: str | None,
    reviewers: Sequence[str],
    families: Mapping[str, str] | None = None,
) -> None:
    """Refuse, in one line, a chain for an unknown role, naming a bad model, or reaching the family of
    the judge or of a reviewer."""
    guarded = {family_of(judge, families): f"the judge's ({judge})"} if judge else {}
    for reviewer in reviewers:
        guarded.setdefault(family_of(reviewer, families), f"a reviewer's ({reviewer})")
    for role, chain in chains.items():
        if role not in ROLES:
            raise UserError(
                f"governor.fallback: unknown role {role!r} (roles: {', '.join(ROLES)})", hint=_HINT
            )
        for name in chain:
            parse_model_name(name)
            family = family_of(name, families)
            if family in guarded:
                raise UserError(
                    f"governor.fallback.{role}: {name} is of the {family} family, {guarded[family]}:"
                    " a fallback must stay independent of the judge and the reviewers",
                    hint=_HINT,
                )


class FallbackModel:
    """`models[0]`, then the others in turn when one fails for good (see the module docstring)."""

    def __init__(self, models: Sequence[Model]) -> None:
        if not models:
            raise ValueError("a fallback chain needs a model")
        self.models = list(models)
        self.name = self.models[0].name

    async def probe(self, timeout_s: float = 15.0) -> str | None:
        """Whether the first model's server answers (see `WireModel.probe`)."""
        probe = getattr(self.models[0], "probe", None)
        return None if probe is None else await probe(timeout_s)

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        on_text: TextCallback | None = None,
    ) -> Completion:
        last: ModelError | None = None
        for model in self.models:
            try:
                return await model.complete(messages, tools, on_text=on_text)
            except (RefusedError, ContextOverflowError):
                raise
            except ModelError as error:
                last = error
        assert last is not None
        raise last
