"""Token counts and the simulated prompt cache of the fake server.

Token counting is a deterministic approximation, not any provider's tokenizer: a token is a run of at
most four word characters, or one punctuation character, each with the whitespace before it
(`TOKEN_RE`). English prose comes out near the usual ~4 characters per token; code and JSON count a
little higher, as real tokenizers do. The pieces join back to the exact text, so the same regex also
cuts streamed text into chunks.

The prompt of a request is rendered part by part (system, each tool, each message) and each part is
tokenized on its own, so a conversation that grows by appending messages keeps its earlier tokens as
an exact prefix. `PromptCache` remembers, per model, hashes of the token prefixes of earlier prompts
at every `block_tokens` boundary (real providers also cache in blocks) and reports the longest one
seen before as cached; the blocks beyond it are written. Its memory is bounded: at most `max_entries`
prefix hashes, the least recently used dropped first.

Nothing here knows a wire protocol; the wire modules map `Usage` to each provider's fields.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from hilbert.models.types import Message, Usage
from hilbert.testing.fake_server.responder import Conversation, Reply

TOKEN_RE = re.compile(r"\s*\w{1,4}|\s*[^\w\s]|\s+")


def tokenize(text: str) -> list[str]:
    """Split `text` into approximate tokens; `"".join(tokenize(t)) == t`."""
    return TOKEN_RE.findall(text)


def count_tokens(text: str) -> int:
    return len(TOKEN_RE.findall(text))


def chunk_text(text: str, tokens_per_chunk: int) -> list[tuple[str, int]]:
    """Cut `text` into pieces of about `tokens_per_chunk` tokens: (piece, its token count)."""
    tokens = tokenize(text)
    step = max(1, tokens_per_chunk)
    return [("".join(tokens[i : i + step]), len(tokens[i : i + step])) for i in range(0, len(tokens), step)]


def _message_text(message: Message) -> str:
    text = f"{message.role}: {message.content}"
    if message.tool_call_id is not None:
        marker = " error" if message.is_error else ""
        text = f"{message.role} [{message.tool_call_id}]{marker}: {message.content}"
    for call in message.tool_calls:
        arguments = call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)
        text += f"\ncall {call.name} {arguments}"
    return text


def prompt_parts(conversation: Conversation) -> list[str]:
    """The prompt as text parts, in the order a provider would see them."""
    parts = [f"system: {conversation.system}"] if conversation.system else []
    parts += [
        f"tool {t.name}: {t.description} {json.dumps(t.parameters, sort_keys=True)}"
        for t in conversation.tools
    ]
    parts += [_message_text(m) for m in conversation.messages]
    return parts


def prompt_tokens(conversation: Conversation) -> list[str]:
    return [token for part in prompt_parts(conversation) for token in tokenize(part + "\n")]


def reply_tokens(reply: Reply) -> int:
    total = count_tokens(reply.text)
    for call in reply.tool_calls:
        arguments = call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)
        total += count_tokens(call.name) + count_tokens(arguments)
    return total


class PromptCache:
    """Longest previously seen prompt prefix, per model, in blocks of `block_tokens` tokens."""

    def __init__(self, *, block_tokens: int = 16, max_entries: int = 100_000) -> None:
        self.block_tokens = block_tokens
        self.max_entries = max_entries
        self._seen: OrderedDict[tuple[str, bytes], None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def _prefix_keys(self, model: str, tokens: Sequence[str]) -> Iterable[tuple[str, bytes]]:
        digest = hashlib.blake2b(model.encode(), digest_size=16)
        for end in range(self.block_tokens, len(tokens) + 1, self.block_tokens):
            digest.update("\x1f".join(tokens[end - self.block_tokens : end]).encode() + b"\x1e")
            yield (model, digest.digest())

    def read_and_write(self, model: str, tokens: Sequence[str]) -> tuple[int, int]:
        """Look the prompt up, then remember it. Returns (tokens read from cache, tokens written)."""
        keys = list(self._prefix_keys(model, tokens))
        hit_blocks = 0
        for key in keys:
            if key not in self._seen:
                break
            hit_blocks += 1
        for key in keys:
            self._seen[key] = None
            self._seen.move_to_end(key)
        while len(self._seen) > self.max_entries:
            self._seen.popitem(last=False)
        return hit_blocks * self.block_tokens, (len(keys) - hit_blocks) * self.block_tokens


def measure(cache: PromptCache, conversation: Conversation, reply: Reply) -> Usage:
    """Usage of one call, in hilbert's convention (`input_tokens` is the whole prompt)."""
    tokens = prompt_tokens(conversation)
    read, written = cache.read_and_write(conversation.model, tokens)
    return Usage(
        input_tokens=len(tokens),
        output_tokens=reply_tokens(reply),
        cache_read_tokens=read,
        cache_write_tokens=written,
    )
