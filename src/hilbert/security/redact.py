"""Keeping secrets out of the event log and out of everything hilbert prints (layer 5 of
docs/design/security.md).

A `Redactor` replaces with `***`:

- the value of every environment variable whose name looks secret (`SECRET_NAME`: API_KEY, TOKEN,
  SECRET, PASSWORD, PASSWD, ACCESS_KEY, PRIVATE_KEY, CREDENTIAL), when the value has at least
  `MIN_SECRET_CHARS` characters (so `PASSWORD=x` does not wipe every "x"), is not a plain word
  (`CREDENTIALS_PROVIDER=environment` is a setting, not a secret: masking it would mask the word
  everywhere) and does not name an existing file or folder
  (`GOOGLE_APPLICATION_CREDENTIALS=/path/key.json` names where a secret is, and paths are what a log
  is read for);
- key-shaped strings, whoever's key they are: OpenAI and Anthropic keys (`sk-…`, `sk-proj-…`,
  `sk-ant-…`), GitHub tokens (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`), AWS access key
  ids (`AKIA…`, `ASIA…`), Slack tokens (`xoxb-`, `xoxp-`, …), Stripe (`sk_live_`, `rk_test_` …),
  Hugging Face (`hf_`), Google API keys (`AIza…`), GitLab (`glpat-`), hilbert's gateway tokens
  (`hilbert-gw-`), the token after `Bearer ` (the word stays), and PEM private key blocks
  (`-----BEGIN … PRIVATE KEY-----` to its END line, or to the end
  of a text cut short).

All of it is one precompiled regular expression, so a text without secrets costs one scan. The
event store redacts every event and message on write (`hilbert.store.event_store`), so views that
read the log show no secret; text printed straight from a model reply or a command's output goes
through the CLI's redactor. Commands never get these variables at all (`command_env`).

What must not live here: deciding which variables a command gets (`hilbert.agent.tools`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MASK = "***"
MIN_SECRET_CHARS = 8
SECRET_NAME = re.compile(
    r"API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL", re.IGNORECASE
)

KEY_SHAPES = (
    r"\bsk-[A-Za-z0-9_-]{20,}",  # OpenAI (sk-, sk-proj-) and Anthropic (sk-ant-api03-)
    r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{22,}",  # GitHub fine-grained tokens
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key ids
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",  # Slack tokens
    r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe keys
    r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face tokens
    r"\bAIza[0-9A-Za-z_-]{35}",  # Google API keys
    r"\bglpat-[A-Za-z0-9_-]{20,}",  # GitLab tokens
    r"\bhilbert-gw-[A-Za-z0-9_-]{20,}",  # hilbert's own gateway tokens (hilbert.models.gateway)
    r"(?<=\b[Bb]earer )(?=[A-Za-z0-9._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{12,}",  # HTTP bearer tokens
    r"-----BEGIN[A-Z ]*PRIVATE KEY-----(?s:.*?)(?:-----END[A-Z ]*PRIVATE KEY-----|\Z)",  # PEM keys
)
# A text holding none of these (nor a known value) has no key shape: it is returned unscanned.
KEY_MARKS = (
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "AKIA",
    "ASIA",
    "xox",
    "_live_",
    "_test_",
    "hf_",
    "AIza",
    "glpat-",
    "hilbert-gw-",
    "earer ",
    "PRIVATE KEY",
)


_SK = re.compile(r"\bsk-")  # a word boundary: "task-" and "disk-" are not worth a full scan
_PLAIN_WORD = re.compile(r"[a-z]+(?:[-_][a-z]+)*")


def looks_secret(name: str) -> bool:
    """Whether an environment variable of this name holds a secret (its value is never shown)."""
    return SECRET_NAME.search(name) is not None


@dataclass(frozen=True)
class Redactor:
    """Replaces `values` (exact strings) and key-shaped strings with `***`. Build it with
    `Redactor.from_env`; `Redactor()` knows the key shapes only. Its repr never shows the values."""

    values: tuple[str, ...] = field(default=(), repr=False)
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _marks: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Longest first, so a value that contains another is replaced whole.
        known = sorted({v for v in self.values if v}, key=len, reverse=True)
        pattern = "|".join([*map(re.escape, known), *KEY_SHAPES])
        object.__setattr__(self, "_pattern", re.compile(pattern))
        object.__setattr__(self, "_marks", (*known, *KEY_MARKS))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Redactor:
        """A redactor for the secrets in `env` (default: this process's environment, read now)."""
        env = os.environ if env is None else env
        return cls(tuple(value.strip() for name, value in env.items() if _is_secret_value(name, value)))

    def redact(self, text: str) -> str:
        """`text` with every secret replaced by `***`."""
        if not any(mark in text for mark in self._marks) and not _SK.search(text):  # the common case
            return text
        return self._pattern.sub(MASK, text)

    def redact_json(self, value: Any) -> Any:
        """A copy of a JSON-like value (dicts, lists, tuples, strings, numbers) with every string in it,
        keys included, redacted. Other values are returned as they are."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {
                (self.redact(k) if isinstance(k, str) else k): self.redact_json(v) for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.redact_json(item) for item in value]
        return value


def _is_secret_value(name: str, value: str) -> bool:
    if not looks_secret(name) or len(value.strip()) < MIN_SECRET_CHARS:
        return False
    if _PLAIN_WORD.fullmatch(value.strip()):
        return False
    try:
        return not os.path.exists(value.strip())
    except (OSError, ValueError):  # not a usable path (NUL bytes, too long): a secret, then
        return True
