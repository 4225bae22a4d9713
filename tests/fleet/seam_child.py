"""A worker that is not hilbert: a separate OS process with a tiny agent loop of its own (one `bash`
tool, the official `openai` SDK), for the Worker and Runtime seam tests (`test_seams.py`).

It imports nothing of hilbert. It reads one JSON request on stdin — its task spec, its grant (base URL,
token, model: all it knows of models), the file it keeps its conversation in, and, placed by the
subprocess runtime, a base bundle to clone and where to write its candidate bundle — and writes JSON
lines on stdout: `{"event": kind, "data": {...}}` as it goes, then `{"outcome": {...}}`. Sent back by
the stop gate, it is run again with the gate's feedback and goes on with its saved conversation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from openai import OpenAI

BASH: Any = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a bash command in the workspace.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}
GIT = ["git", "-c", "user.name=child", "-c", "user.email=child@example.invalid"]


def say(**line: Any) -> None:
    print(json.dumps(line), flush=True)


def git(*args: str, cwd: Path) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def main() -> None:
    request = json.loads(sys.stdin.read())
    spec, grant = request["spec"], request["grant"]
    say(event="environment", data={"names": sorted(os.environ), "pid": os.getpid()})
    work = Path.cwd()
    if request.get("base_bundle"):  # placed by the subprocess runtime: its own clone of the base
        work = Path(request["clone"])
        if not work.exists():
            work.mkdir(parents=True)
            git("init", "-q", "-b", "work", cwd=work)
            git("fetch", "-q", request["base_bundle"], request["base_ref"], cwd=work)
            git("reset", "-q", "--hard", "FETCH_HEAD", cwd=work)
    session = Path(request["session"])
    if session.exists():
        messages = json.loads(session.read_text())
    else:
        first = f"Agent: {spec['worker']}\n\n{spec['prompt']}"
        messages = [{"role": "system", "content": spec["system_prompt"]}, {"role": "user", "content": first}]
    if spec["feedback"]:
        messages.append({"role": "user", "content": spec["feedback"]})
    client = OpenAI(base_url=grant["base_url"], api_key=grant["token"], max_retries=2)
    usage = {"input_tokens": 0, "output_tokens": 0}
    status, text, turns = "no_finish", "", 0
    for turns in range(1, 200):
        reply = client.chat.completions.create(model=grant["model"], messages=messages, tools=[BASH])
        message = reply.choices[0].message
        counted = reply.usage
        used = {"input_tokens": counted.prompt_tokens if counted else 0,
                "output_tokens": counted.completion_tokens if counted else 0}  # fmt: skip
        usage = {k: usage[k] + used[k] for k in usage}
        say(event="model_call", data={"turn": turns, "usage": used})
        calls = message.tool_calls or []
        messages.append(
            {
                "role": "assistant",
                "content": message.content or "",
                **({"tool_calls": [c.model_dump() for c in calls]} if calls else {}),
            }
        )
        if not calls:
            status, text = "finished", message.content or ""
            break
        for call in calls:
            command = json.loads(getattr(call, "function").arguments)["command"]  # noqa: B009
            done = subprocess.run(["bash", "-c", command], cwd=work, capture_output=True, text=True)
            output = (
                f"<returncode>{done.returncode}</returncode>\n<output>\n{done.stdout}{done.stderr}</output>"
            )
            say(event="command", data={"command": command[:200], "exit": done.returncode})
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    session.write_text(json.dumps(messages))
    if request.get("candidate_bundle"):
        git("add", "-A", cwd=work)
        if subprocess.run(["git", "diff", "--cached", "--quiet"], cwd=work).returncode:
            git("commit", "-qm", f"{spec['task']['id']}: round {spec['round']}", cwd=work)
        git("bundle", "create", "-q", request["candidate_bundle"], "work", cwd=work)
    claim, _, evidence = text.partition("\n\nEvidence:\n")
    outcome = {"status": status, "claim": claim, "evidence": evidence, "turns": turns, "usage": usage}
    say(outcome=outcome)


if __name__ == "__main__":
    main()
