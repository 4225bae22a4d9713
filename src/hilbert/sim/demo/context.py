"""The demo's context scene: an agent whose task outgrows its context budget keeps working.

One agent (the fake server's `longhaul` responder: a part file a turn, each turn with a long command output)
runs in hilbert's own loop with a small budget, so compaction cuts several times. The scene shows what
the log shows — each `context_compacted` event, the task state restated after the cut — and checks the
result itself: every part written, and the task's verify command passing when the harness runs it.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from hilbert.agent.loop import run_agent
from hilbert.agent.policies import TurnLimit
from hilbert.agent.tools import ToolBox
from hilbert.commands import Runner
from hilbert.context.policy import CONTEXT_COMPACTED, compaction_for
from hilbert.models import make_model
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer

AGENT = "Ramanujan"
PARTS = 30
STRATEGY = "forget:2,4000"  # the default's rule with a budget the demo crosses in a minute
VERIFY = "ls part*.txt | wc -l"
TASK = (
    f"Task long-1: write part1.txt to part{PARTS}.txt, one a turn, each holding its number, and look at "
    f"a long listing after each.\nThe task is done when `{VERIFY}` passes and prints {PARTS}. Change only "
    "what the task needs. Do not edit or skip tests."
)


async def run_context_scene(
    directory: Path, db: Path, *, runner: Runner, echo: Callable[[str], None]
) -> bool:
    workspace = directory / "long-task"
    workspace.mkdir(parents=True)
    run = f"demo-context-{time.strftime('%H%M%S')}"
    with FakeServer(f"longhaul:parts={PARTS}") as server, EventStore.open(db) as store:
        model = make_model(f"anthropic:fake-longhaul@{server.base_url}", env={})
        result = await run_agent(
            run=run,
            agent=AGENT,
            task=TASK,
            model=model,
            toolbox=ToolBox(workspace, runner=runner),
            store=store,
            policies=[TurnLimit(3 * PARTS), compaction_for(STRATEGY, model=model, store=store)],
        )
        cuts = [e.data for e in store.events(run=run, kinds=[CONTEXT_COMPACTED])]
        pinned = [store.get_messages([c["pinned"]])[0].content for c in cuts if c.get("pinned")]
    echo(
        f"{AGENT} writes {PARTS} files, one a turn, each turn reading a long output, with a context budget "
        f"of 4,000 tokens ({STRATEGY}):"
    )
    if cuts:
        after = [cut["tokens_after"] for cut in cuts]
        echo(
            f"context compacted {len(cuts)} times (`context_compacted` in the log): the conversation grew to "
            f"{cuts[-1]['tokens_before']:,} tokens; each cut brought what is sent back to "
            f"{min(after):,}–{max(after):,}"
        )
    restated = all(TASK.splitlines()[0] in text and f"`{VERIFY}`" in text for text in pinned)
    if pinned:
        echo(f"after each cut the task state is restated: {pinned[-1].splitlines()[1][:100]} …")
    done = subprocess.run(VERIFY, shell=True, cwd=workspace, capture_output=True, text=True)
    counted = done.stdout.strip()
    echo(
        f"{AGENT} {result.status} after {result.turns} turns; the harness ran `{VERIFY}`: {counted} "
        f"(expected {PARTS})"
    )
    return (
        len(cuts) >= 2 and bool(pinned) and restated and result.status == "finished" and counted == str(PARTS)
    )
