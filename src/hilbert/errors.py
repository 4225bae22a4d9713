"""The one small exception tree of hilbert.

    HilbertError                 anything hilbert raises on purpose
    ├── UserError                the person can fix it: bad input, missing key, unknown model, bad flag
    │   └── ConfigError          a settings file or environment variable is wrong
    └── RunError                 something failed while running
        └── ModelError           a model call failed for good (after retries), with a hint
            ├── ContextOverflowError   the conversation no longer fits the model's window
            └── RefusedError           the provider refused the request (policy, auth, bad request)
                └── UnknownModelError  the provider does not know the model (HTTP 404)

Every error carries a one-line message and, where there is one, a `hint` that says what to do.
Only the CLI edge turns them into text (`str(err)` is the message and the hint together); nothing
below it catches an error just to print it. Control flow that is really data (a verdict, a stop)
is never an exception.
"""

from __future__ import annotations


class HilbertError(Exception):
    """Base of every error hilbert raises on purpose."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} — {self.hint}" if self.hint else self.message


class UserError(HilbertError):
    """The person can fix this: bad input, a missing key, an unknown model name."""


class ConfigError(UserError):
    """A settings file or environment variable is wrong."""


class RunError(HilbertError):
    """Something failed while running."""


class ModelError(RunError):
    """A model call failed for good, after the retries allowed."""


class ContextOverflowError(ModelError):
    """The conversation no longer fits the model's context window."""


class RefusedError(ModelError):
    """The provider refused the request (authentication, policy or a malformed request)."""


class UnknownModelError(RefusedError):
    """The provider does not know the model name (HTTP 404 / model_not_found)."""
