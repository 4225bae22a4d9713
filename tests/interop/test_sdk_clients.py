"""The official openai and anthropic SDKs, driven by hilbert's own agent loop over each wire
protocol, fix a one-bug generated project through the fake server's engineer; the event log holds
the whole story."""

from __future__ import annotations

import asyncio
import random
import subprocess
from pathlib import Path

import pytest

from hilbert.agent.loop import run_agent
from hilbert.agent.policies import TurnLimit
from hilbert.agent.tools import ToolBox
from hilbert.commands import Runner, command_env
from hilbert.models import make_model
from hilbert.sim.sample import generate_sample_project
from hilbert.store import EventStore, rebuild_conversation
from hilbert.testing.fake_server import FakeServer

pytestmark = pytest.mark.interop
KEYS = {"OPENAI_API_KEY": "test", "ANTHROPIC_API_KEY": "test"}
PATHS = {"openai": "/v1/chat/completions", "openai-responses": "/v1/responses", "anthropic": "/v1/messages"}
AGENTS = {
    "openai": "AsyncOpenAI/Python",
    "openai-responses": "AsyncOpenAI/Python",
    "anthropic": "AsyncAnthropic/Python",
}


def suite_passes(path: Path) -> bool:
    done = subprocess.run(
        ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=path,
        capture_output=True,
        env=command_env(hilbert_python_first=True),
        timeout=120,
    )
    return done.returncode == 0


@pytest.mark.parametrize("protocol", ["openai", "openai-responses", "anthropic"])
def test_agent_fixes_the_project_over_each_protocol(tmp_path: Path, protocol: str) -> None:
    seed = random.randrange(1_000_000)
    project = generate_sample_project(tmp_path / "project", seed, bugs=1)
    tests_before = {f: (project.path / f).read_text() for f in project.test_files}
    assert not suite_passes(project.path)
    with FakeServer("engineer", seed=seed) as server, EventStore.open(tmp_path / "log.db") as store:
        base = server.openai_base_url if protocol.startswith("openai") else server.base_url
        model = make_model(f"{protocol}:fake@{base}", env=KEYS)
        result = asyncio.run(
            run_agent(
                run="r1",
                agent="Noether",
                task=project.task,
                model=model,
                toolbox=ToolBox(
                    project.path, runner=Runner.unsandboxed(command_env(hilbert_python_first=True))
                ),
                store=store,
                policies=[TurnLimit(40)],
            )
        )
        assert result.status == "finished", (seed, result)
        assert suite_passes(project.path), seed
        assert {f: (project.path / f).read_text() for f in project.test_files} == tests_before
        # the log holds every model call and tool call, and the conversation as it was sent
        kinds = [e.kind for e in store.events(run="r1")]
        assert kinds[0] == "agent_started" and kinds[-1] == "agent_stopped"
        assert kinds.count("model_call") == result.turns == len(server.requests)
        for request in server.requests:  # the real SDK spoke the protocol, streaming
            assert request["path"].split("?")[0] == PATHS[protocol] and request["body"]["stream"] is True
            assert request["headers"]["user-agent"].startswith(AGENTS[protocol])
        assert result.usage.cache_read_tokens > 0
        conversation = rebuild_conversation(store, "r1", "Noether")
        assert conversation[-1].name == "finish"
        assert [m.role for m in conversation[:2]] == ["system", "user"]
