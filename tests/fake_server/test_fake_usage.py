"""Token counting and the simulated prompt cache, on their own."""

from __future__ import annotations

from hilbert.testing.fake_server.usage import PromptCache, chunk_text, count_tokens, tokenize

PROSE = (
    "The fake server counts tokens with a simple rule, so that usage and the prompt cache are "
    "deterministic: a token is a short run of letters or one punctuation mark."
)


def test_tokens_join_back_to_the_text_and_average_about_four_characters() -> None:
    for text in (PROSE, "def f(x):\n    return x  # trailing  ", "", "  \n"):
        assert "".join(tokenize(text)) == text
    assert 3.0 <= len(PROSE) / count_tokens(PROSE) <= 6.0
    pieces = chunk_text(PROSE, 4)
    assert "".join(piece for piece, _ in pieces) == PROSE and {n for _, n in pieces[:-1]} == {4}


def test_cache_reports_the_longest_seen_prefix_in_blocks() -> None:
    cache = PromptCache(block_tokens=4)
    first = tokenize(PROSE)
    assert cache.read_and_write("m", first) == (0, len(first) // 4 * 4)
    longer = first + tokenize(" And then some more words arrive at the end.")
    read, written = cache.read_and_write("m", longer)
    assert read == len(first) // 4 * 4 and read + written == len(longer) // 4 * 4
    assert cache.read_and_write("other-model", first)[0] == 0
    changed = ["X", *first[1:]]
    assert cache.read_and_write("m", changed)[0] == 0  # a different first token shares no prefix


def test_cache_memory_is_bounded() -> None:
    cache = PromptCache(block_tokens=4, max_entries=50)
    for i in range(40):
        cache.read_and_write("m", tokenize(f"conversation {i}: {PROSE}"))
    assert len(cache) == 50
    latest = tokenize(f"conversation 39: {PROSE}")
    assert cache.read_and_write("m", latest)[0] > 0  # the most recent prompts survive eviction
