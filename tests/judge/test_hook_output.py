"""How `hilbert hook stop` sends an agent back (`hilbert.judge.hook.send_back`): Claude Code versions
verified to go on after the Stop hook's `additionalContext` get it (no "Stop hook error" label); any
other client — Codex, an unverified Claude Code, a missing or unreadable transcript — gets the block
every Stop-hook client honours. The real binary's side is tests/interop/test_claude_code_stop_hook.py."""

from __future__ import annotations

import json
from pathlib import Path

from hilbert.judge.hook import CONTEXT_VERSIONS, read_hook_input, send_back


def stop_input(tmp_path: Path, transcript: list[object] | None) -> str:
    path = tmp_path / "session.jsonl"
    if transcript is not None:
        path.write_text("".join(json.dumps(line) + "\n" for line in transcript) + "not json\n")
    return json.dumps({"session_id": "s", "cwd": str(tmp_path), "transcript_path": str(path)})


def test_a_verified_claude_code_gets_additional_context_and_everyone_else_the_block(tmp_path: Path) -> None:
    verified = sorted(CONTEXT_VERSIONS)[0]
    queued = {"type": "queue-operation", "sessionId": "s"}  # Claude Code's first line names no version
    claude = [queued, {"type": "user", "sessionId": "s", "version": verified, "cwd": str(tmp_path)}]
    answer = send_back(read_hook_input(stop_input(tmp_path, claude)), "fix it")
    assert answer == {"hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": "fix it"}}
    block = {"decision": "block", "reason": "fix it"}
    older = [queued, {"type": "user", "sessionId": "s", "version": "1.0.0"}]
    codex = [{"type": "session_meta", "payload": {"cli_version": verified, "originator": "codex_exec"}}]
    for transcript in (older, codex, [], None):
        assert send_back(read_hook_input(stop_input(tmp_path, transcript)), "fix it") == block, transcript
    no_path = json.dumps({"session_id": "s", "cwd": str(tmp_path)})
    assert send_back(read_hook_input(no_path), "fix it") == block
