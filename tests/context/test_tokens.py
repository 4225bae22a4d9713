"""Token counting offline: OpenAI's encodings from the shipped vocabularies (the very bytes tiktoken
expects, nothing downloaded), and a calibrated stand-in for tokenizers that are not public."""

from __future__ import annotations

import gzip
import hashlib
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from hilbert.context.render import TokenCache
from hilbert.context.tokens import VOCABULARIES, Approximate, calibrate, openai_encoding, tokenizer_for
from hilbert.errors import UserError
from hilbert.models.types import Message, ToolCall


def test_the_shipped_vocabularies_are_the_files_tiktoken_expects() -> None:
    for name, (_, expected) in VOCABULARIES.items():
        packed = resources.files("hilbert.context").joinpath(f"vocab/{name}.tiktoken.gz").read_bytes()
        assert hashlib.sha256(gzip.decompress(packed)).hexdigest() == expected, name


NO_NETWORK = """
import socket, sys, tiktoken
def refuse(*args, **kwargs):
    raise RuntimeError("reached for the network")
socket.getaddrinfo = refuse
socket.socket.connect = refuse
from hilbert.context.tokens import openai_encoding
print(*(openai_encoding(name).encode("hello world") for name in ("o200k_base", "cl100k_base")))
try:
    tiktoken.get_encoding("p50k_base")  # not shipped: tiktoken downloads it, and the guard must catch that
except Exception as err:
    print("guard:", type(err).__name__, err)
"""


def test_openai_encodings_give_the_real_token_ids_without_the_network(tmp_path: Path) -> None:
    # a fresh process, tiktoken's own cache empty, every connection refused
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path), "DATA_GYM_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", NO_NETWORK], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    first, guard = done.stdout.strip().splitlines()
    assert first == "[24912, 2375] [15339, 1917]"
    assert "reached for the network" in guard  # the guard is real: a download would have been stopped
    o200k = openai_encoding("o200k_base")
    assert o200k.count("<|endoftext|>") > 1  # a special token in text is counted as text
    with pytest.raises(UserError, match="no shipped vocabulary 'p50k_base'"):
        openai_encoding("p50k_base")


def test_each_model_name_gets_the_best_offline_tokenizer() -> None:
    assert tokenizer_for("openai:gpt-4o").name == "o200k_base"
    assert tokenizer_for("openai:gpt-4").name == "cl100k_base"
    assert tokenizer_for("openai:my-local-model@http://127.0.0.1:8000/v1").name == "o200k_base"
    assert tokenizer_for("anthropic:claude-sonnet-4-5").name.startswith("approximate")


def test_the_approximation_is_calibrated_against_what_a_server_reported() -> None:
    text = "def parse_date(value):\n    return datetime.strptime(value, '%Y-%m-%d')\n" * 20
    exact = openai_encoding("o200k_base").count(text)
    fitted = calibrate([(text, exact)])
    assert abs(fitted.count(text) - exact) <= 0.1 * exact  # 20 equal lines: the count moves in steps of 20
    assert fitted.encode(text)[:5] == fitted.encode(text + "more")[:5]  # stable ids: prefixes compare
    with pytest.raises(UserError):
        Approximate(0.01)
    with pytest.raises(UserError, match="no usable samples"):
        calibrate([])


def test_every_message_is_counted_with_its_framing_and_tool_calls() -> None:
    tokens = TokenCache(openai_encoding("o200k_base"))
    plain = Message("user", "hello world")
    call = Message("assistant", "", tool_calls=(ToolCall("c1", "shell", {"command": "ls"}),))
    assert tokens.count(plain) == 2 + 3
    assert tokens.count(call) > 3 and tokens.tokens(call)[:2] != tokens.tokens(plain)[:2]
    assert tokens.total([plain, call]) == tokens.count(plain) + tokens.count(call)
