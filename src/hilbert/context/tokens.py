"""Token counting without the network: exact for the OpenAI encodings, a calibrated approximation else.

- **Exact** (`openai_encoding("o200k_base" | "cl100k_base")`): OpenAI's own BPE (`tiktoken`, the
  official implementation) on the vocabularies shipped in `context/vocab/` — nothing is downloaded at
  run time. The files are checked against the SHA-256 tiktoken itself expects for OpenAI's published
  files before use, then handed to tiktoken's own constructor (through a private cache folder, the
  loader's documented `TIKTOKEN_CACHE_DIR`), so the pattern and special tokens are tiktoken's, not a copy.
- **Approximate** (`Approximate(chars_per_token)`): for models whose tokenizer is not public (Anthropic,
  Gemini, most open models behind an OpenAI-compatible server). It splits text into runs of
  non-space (each with the space before it) and runs of space, then cuts each run every
  `chars_per_token` characters (at least one token per run); each token is a stable integer (a hash
  of its text), so prefixes compare as with a real tokenizer. `chars_per_token` comes from
  `calibrate`: the value that makes its total count match the `usage` a server reported for known
  texts. The default, 4.0, is the common rule of thumb for English and code.

`tokenizer_for(model_name)` picks: exact for OpenAI model names tiktoken knows, o200k_base for other
`openai:` models (for a model behind another server, `openai:NAME@URL` — vLLM, Ollama … — that is an
approximation too: its own tokenizer is not shipped, and a modern BPE vocabulary is nearer to it than a
characters ratio), else the approximation.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import math
import os
import re
import tempfile
import threading
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Protocol

import tiktoken

from hilbert.errors import UserError

# what tiktoken downloads each vocabulary from (it names its cache file by this) and the SHA-256 it
# expects of the file: ours must be the same bytes
VOCABULARIES = {
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}
DEFAULT_CHARS_PER_TOKEN = 4.0
_PIECES = re.compile(r" ?\S+|\s+")  # a run of non-space takes the space before it
_LOCK = threading.Lock()
_LOADED: dict[str, tiktoken.Encoding] = {}


class Tokenizer(Protocol):
    @property
    def name(self) -> str: ...

    def encode(self, text: str) -> list[int]: ...

    def count(self, text: str) -> int: ...


@dataclass(frozen=True)
class Exact:
    """An OpenAI encoding: the real token ids."""

    encoding: tiktoken.Encoding

    @property
    def name(self) -> str:
        return str(self.encoding.name)

    def encode(self, text: str) -> list[int]:
        return list(self.encoding.encode(text, disallowed_special=()))  # special tokens count as text

    def count(self, text: str) -> int:
        return len(self.encode(text))


@dataclass(frozen=True)
class Approximate:
    """A stand-in for a tokenizer that is not public: about `chars_per_token` characters per token."""

    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN

    def __post_init__(self) -> None:
        if not 0.5 <= self.chars_per_token <= 20:
            raise UserError(
                f"chars_per_token {self.chars_per_token} is not plausible",
                hint="between 0.5 and 20 (English and code: about 3-5)",
            )

    @property
    def name(self) -> str:
        return f"approximate({self.chars_per_token:g} chars/token)"

    def encode(self, text: str) -> list[int]:
        ids = []
        for piece in _PIECES.findall(text):
            parts = max(1, math.ceil(len(piece) / self.chars_per_token))
            cuts = [round(i * len(piece) / parts) for i in range(parts + 1)]
            ids += [zlib.crc32(piece[a:b].encode()) for a, b in itertools.pairwise(cuts)]
        return ids

    def count(self, text: str) -> int:
        return sum(max(1, math.ceil(len(p) / self.chars_per_token)) for p in _PIECES.findall(text))


def calibrate(samples: Iterable[tuple[str, int]]) -> Approximate:
    """The approximation whose total count over `samples` (text, tokens the server reported for it)
    matches the servers' total: the count falls as `chars_per_token` grows, so a bisection finds it."""
    pairs = [(text, tokens) for text, tokens in samples if tokens > 0 and text]
    if not pairs:
        raise UserError("no usable samples to calibrate on", hint="give (text, reported tokens) pairs")
    reported = sum(tokens for _, tokens in pairs)
    low, high = 0.5, 20.0
    for _ in range(40):
        middle = (low + high) / 2
        if sum(Approximate(middle).count(text) for text, _ in pairs) > reported:
            low = middle
        else:
            high = middle
    return Approximate(round((low + high) / 2, 3))


def openai_encoding(name: str) -> Exact:
    """The OpenAI encoding `name` from the shipped vocabulary; a `UserError` for one not shipped."""
    if name not in VOCABULARIES:
        raise UserError(f"no shipped vocabulary {name!r}", hint=f"one of {', '.join(VOCABULARIES)}")
    with _LOCK:
        if name not in _LOADED:
            _LOADED[name] = _load(name)
        return Exact(_LOADED[name])


def _load(name: str) -> tiktoken.Encoding:
    url, expected = VOCABULARIES[name]
    data = gzip.decompress(
        resources.files("hilbert.context").joinpath(f"vocab/{name}.tiktoken.gz").read_bytes()
    )
    if hashlib.sha256(data).hexdigest() != expected:
        raise UserError(f"the shipped {name} vocabulary is damaged", hint="reinstall hilbert")
    with tempfile.TemporaryDirectory(prefix="hilbert-vocab-") as cache:
        (Path(cache) / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
        before = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = cache
        try:
            return tiktoken.get_encoding(name)
        finally:
            if before is None:
                del os.environ["TIKTOKEN_CACHE_DIR"]
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = before


def tokenizer_for(model_name: str) -> Tokenizer:
    """The best offline tokenizer for a hilbert model name (`openai:gpt-4o`, `anthropic:…`, a bare name)."""
    provider, _, rest = model_name.partition(":") if ":" in model_name else ("", "", model_name)
    bare = rest.split("@", 1)[0]
    try:
        encoding = tiktoken.encoding_name_for_model(bare)
    except KeyError:
        encoding = "o200k_base" if provider.startswith("openai") else ""
    if encoding in VOCABULARIES:
        return openai_encoding(encoding)
    return Approximate()


__all__ = ["Approximate", "Exact", "Tokenizer", "calibrate", "openai_encoding", "tokenizer_for"]
