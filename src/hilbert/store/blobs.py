"""How a JSON value is addressed by its content: canonical JSON and its SHA-256.

A blob's key is the hex SHA-256 of its canonical JSON (keys sorted, no insignificant whitespace,
UTF-8), so the same message always gets the same key in any process and is stored once. Anything
that wants to predict a key (a cache in the loop, a test) uses `content_hash`; nothing else here.
The store hashes a message after redacting it (`EventStore.put_messages`), so a message holding a
secret is stored, and keyed, with `***` in its place.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """The one text form of a JSON value that its hash is taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(value: Any) -> str:
    """Hex SHA-256 of `canonical_json(value)`: the key a blob is stored under."""
    return encode_blob(value)[0]


def encode_blob(value: Any) -> tuple[str, str]:
    """`(key, canonical text)` of a value, computing the text once."""
    text = canonical_json(value)
    return hashlib.sha256(text.encode("utf-8")).hexdigest(), text
