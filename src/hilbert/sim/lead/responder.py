"""`LeadResponder`: the fake server's simulated lead, which plans a sample project with the planning tools.

Like the engineer (see `hilbert.sim.engineer.responder`) it holds no state between requests: on every
request it replays its procedure (`procedure.py`) from the start, feeding it what answered each of its
earlier turns, and the action the procedure yields next is the reply. It needs the tools of
`hilbert.fleet.lead_tools.PlanningToolBox` (shell, read_file, list_files, write_plan, finish); offered
anything less, it says so in a text reply (which ends an agent loop) instead of guessing.

Offered the tools of `hilbert.fleet.escalation.EscalationToolBox` (`reassign` among them) instead, it
answers the escalations in its brief (`escalations.py`).

Spec: `lead[:final=true]` — `final=true` adds a last task "Whole suite green" depending on all others.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hilbert.agent.prompts import task_of
from hilbert.errors import UserError
from hilbert.models.types import ToolCall
from hilbert.sim.engineer.actions import Finish, Grep, ListFiles, Observation, Read, Run
from hilbert.sim.engineer.dialects.base import command_observation
from hilbert.sim.lead.escalations import Steer, answer_escalations
from hilbert.sim.lead.procedure import LeadAction, WritePlan, plan_work
from hilbert.testing.fake_server.responder import Conversation, Reply

NEEDED = ("shell", "read_file", "list_files", "grep", "write_plan", "finish")
ESCALATION_TOOLS = ("reassign", "mark_impossible", "finish")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class LeadResponder:
    final_task: bool = False
    seed: int = 0
    name = "lead"  # a class attribute, not a field

    @classmethod
    def from_options(cls, options: Mapping[str, str], seed: int) -> LeadResponder:
        unknown = set(options) - {"final"}
        if unknown:
            raise UserError(
                f"responder 'lead' has no option {', '.join(sorted(unknown))}", hint="lead:final=true"
            )
        final = options.get("final", "false").strip().lower()
        if final not in _TRUE + _FALSE:
            raise UserError(f"lead: final={final!r} is not true or false", hint="lead:final=true")
        return cls(final_task=final in _TRUE, seed=seed)

    def reply(self, conversation: Conversation) -> Reply:
        offered = {tool.name for tool in conversation.tools}
        escalations = "reassign" in offered
        needed = ESCALATION_TOOLS if escalations else NEEDED
        if missing := [name for name in needed if name not in offered]:
            return Reply(
                text=f"I am the lead and work with the tools {', '.join(needed)}; "
                f"this request lacks {', '.join(missing)}, so I cannot go on."
            )
        messages = conversation.messages
        turns = [i for i, m in enumerate(messages) if m.role == "assistant"]
        first = next((m.content for m in messages[: turns[0] if turns else None] if m.role == "user"), "")
        brief = task_of(first)  # without the `Agent: lead` line hilbert's loop puts first
        steps = answer_escalations(brief) if escalations else plan_work(brief, final_task=self.final_task)
        try:
            action = next(steps)
            for n, start in enumerate(turns):
                answers = messages[start + 1 : turns[n + 1] if n + 1 < len(turns) else len(messages)]
                action = steps.send(_observe(answers))
        except StopIteration:
            return Reply(text="I have finished.")
        tag = hashlib.sha256(f"{self.seed}\x1f{brief}".encode()).hexdigest()[:8]
        name, arguments = _call(action)
        why = getattr(action, "why", "")
        return Reply(text=why, tool_calls=(ToolCall(f"call_{tag}_{len(turns)}", name, arguments),))


def _observe(answers: Any) -> Observation:
    results = [m for m in answers if m.role == "tool"]
    notes = [m for m in answers if m.role in ("user", "system")]
    return command_observation(results, notes)


def _call(action: LeadAction | Steer) -> tuple[str, dict[str, Any]]:
    match action:
        case Steer(tool=tool, arguments=arguments):
            return tool, arguments
        case Run(command=command):
            return "shell", {"command": command}
        case Read(path=path, start=start, end=end):
            lines = {"start_line": start, "end_line": end}
            return "read_file", {"path": path, **{k: v for k, v in lines.items() if v is not None}}
        case ListFiles(pattern=pattern):
            return "list_files", {"pattern": pattern}
        case Grep(pattern=pattern, path=path, glob=glob):
            return "grep", {"pattern": pattern, "path": path, **({"glob": glob} if glob else {})}
        case WritePlan(goal=goal, tasks=tasks):
            return "write_plan", {"goal": goal, "tasks": list(tasks)}
        case Finish(claim=claim, evidence=evidence):
            return "finish", {"claim": claim, "evidence": evidence}
    raise TypeError(f"the lead has no tool for {action!r}")
