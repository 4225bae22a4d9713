"""The redactor: known secret values and key-shaped strings become `***`; ordinary text, hashes, paths
and prose about keys stay as they are."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from hilbert.security.redact import Redactor

# Built from pieces so that this file itself holds no key-shaped string a scanner would flag.
OPENAI = "sk-" + "proj-" + "Xy7" * 12
ANTHROPIC = "sk-" + "ant-api03-" + "Q9_z-" * 8
GITHUB = "gh" + "p_" + "a1B2c3" * 6
GITHUB_PAT = "github" + "_pat_" + "11ABCDEFG0_" + "x9" * 15
AWS = "AKIA" + "IOSFODNN7EXAMPL1"
SLACK = "xo" + "xb-" + "1234567890-abcdefABCDEF"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\nline2==\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize("key", [OPENAI, ANTHROPIC, GITHUB, GITHUB_PAT, AWS, SLACK])
def test_key_shaped_strings_are_replaced_whoever_they_belong_to(key: str) -> None:
    redactor = Redactor()  # no environment: the shapes alone
    assert redactor.redact(f"export KEY={key}\nnext line") == "export KEY=***\nnext line"
    assert redactor.redact(f'{{"key": "{key}"}}') == '{"key": "***"}'


def test_bearer_tokens_keep_the_word_and_private_keys_go_whole() -> None:
    redactor = Redactor()
    assert redactor.redact("Authorization: Bearer eyJhbGciOi.J9x2abc-def_7") == "Authorization: Bearer ***"
    assert redactor.redact(f"before\n{PEM}\nafter") == "before\n***\nafter"
    cut_short = "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA"  # output clipped
    assert redactor.redact(cut_short) == "key:\n***"


def test_ordinary_text_hashes_paths_and_prose_about_keys_are_untouched() -> None:
    redactor = Redactor.from_env({"PASSWORD": "x", "TOKENIZERS_PARALLELISM": "false", "HOME": "/home/me"})
    texts = [
        "x marks the spot; tokens are false friends",  # short secret values are not hunted for
        hashlib.sha256(b"blob").hexdigest(),  # blob keys and signatures are hex
        "the task-abcdefghijklmnopqrstuvwxyz is a slug, /home/me/project a path",
        "set the header to `Bearer <token>`; this uses Bearer authentication",
        "AKIA is how an AWS key id starts; sk- how an OpenAI key does",
    ]
    for text in texts:
        assert redactor.redact(text) == text


def test_values_of_secret_named_variables_are_replaced_wherever_they_appear(tmp_path: Path) -> None:
    token, password = "q8Zr-2vLw.pX9", "a+b(c)*d$[e]"  # regex metacharacters are taken literally
    key_file = tmp_path / "service-account.json"
    key_file.write_text("{}")
    redactor = Redactor.from_env(
        {
            "DEPLOY_TOKEN": token,
            "db_password": f"{password}\n",  # any case; surrounding whitespace is not part of it
            "GOOGLE_APPLICATION_CREDENTIALS": str(key_file),  # names a file: a path, not a secret
            "EDITOR": "vim-but-long-enough",  # not a secret name
        }
    )
    text = f"curl -u admin:{password} https://x/?t={token}&t2={token}; key in {key_file}; vim-but-long-enough"
    assert (
        redactor.redact(text)
        == f"curl -u admin:*** https://x/?t=***&t2=***; key in {key_file}; vim-but-long-enough"
    )


def test_a_value_that_contains_another_is_replaced_whole() -> None:
    redactor = Redactor.from_env({"A_TOKEN": "abcd1234", "B_TOKEN": "abcd1234-and-more"})
    assert redactor.redact("x abcd1234-and-more y abcd1234 z") == "x *** y *** z"


def test_a_plain_word_in_a_secret_named_setting_is_not_masked_everywhere() -> None:
    redactor = Redactor.from_env({"CREDENTIALS_PROVIDER": "environment", "DEPLOY_TOKEN": "s3cr3t-t0ken"})
    said = "the environment holds s3cr3t-t0ken; the task-list and disk-usage sk-abcdefghijklmnopqrstu"
    assert redactor.redact(said) == "the environment holds ***; the task-list and disk-usage ***"


def test_newer_key_shapes_are_masked() -> None:
    keys = ["sk_live_abcdefghijklmnop1234", "hf_" + "a1" * 16, "AIza" + "b2" * 17 + "c", "glpat-" + "x9" * 10]
    keys.append("hilbert-gw-" + "Z0" * 16)
    assert Redactor().redact(" | ".join(keys)) == " | ".join(["***"] * len(keys))


def test_json_like_data_is_redacted_everywhere_keys_included_and_left_unchanged() -> None:
    redactor = Redactor.from_env({"MY_API_KEY": "hunter2hunter2"})
    data = {
        "arguments": {"command": "echo hunter2hunter2", "hunter2hunter2": [1, 2.5, None, True]},
        "items": ("ok", [GITHUB, {"deep": f"Bearer {ANTHROPIC}"}]),
        "n": 3,
    }
    assert redactor.redact_json(data) == {
        "arguments": {"command": "echo ***", "***": [1, 2.5, None, True]},
        "items": ["ok", ["***", {"deep": "Bearer ***"}]],
        "n": 3,
    }
    assert data["arguments"]["command"] == "echo hunter2hunter2"  # a copy: the input is not changed


def test_the_redactor_never_shows_the_secrets_it_holds() -> None:
    redactor = Redactor.from_env({"OPENAI_API_KEY": "my-very-secret-value"})
    assert "my-very-secret-value" not in repr(redactor) and "my-very-secret-value" not in str(redactor)
