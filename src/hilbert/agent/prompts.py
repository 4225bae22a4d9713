"""The texts hilbert's own agent is given.

The system prompt holds nothing per agent, so every agent of a fleet sends a byte-identical prefix
(system prompt, then tools) and a provider's prompt cache serves them all from one write; the
agent's name is the first line of its first user message (`first_message`), where the fake server's
policies also look for it. A fleet appends its repository map (`system_prompt`), computed once per
run, so the prefix stays the same for all its agents.
"""

SYSTEM_PROMPT = """\
You are a careful software engineer working alone in a repository (your workspace).
Use the tools to inspect files, run commands and make changes; paths are relative to the workspace.
Rules: read before you guess; run the task's check command yourself; never edit or skip tests to make
them pass; keep changes minimal. When the task is done, call `finish` with your claim and the evidence
(the command you ran and its output). Your claim will be checked independently."""

AGENT_LINE = "Agent: {agent}"

REPOSITORY_MAP_SECTION = """\
## Repository map
The files tracked at the base commit this run started from, and their Python definitions. It is not
updated as work lands: files may have changed, appeared or gone since, so read a file before you
rely on it.

{repository_map}"""


def system_prompt(repository_map: str | None) -> str:
    """The system prompt: `SYSTEM_PROMPT`, then (given one) the run's repository map
    (`hilbert.context.repomap`), the same text for every agent of the run."""
    if not repository_map:
        return SYSTEM_PROMPT
    return f"{SYSTEM_PROMPT}\n\n{REPOSITORY_MAP_SECTION.format(repository_map=repository_map)}"


def first_message(agent: str, task: str) -> str:
    """The first user message: the agent's name on its own line, then the task."""
    return f"{AGENT_LINE.format(agent=agent)}\n\n{task}"


def task_of(message: str) -> str:
    """The task in a first user message (`first_message`'s inverse); a message without the agent's
    line is all task."""
    head, blank, rest = message.partition("\n\n")
    return rest if blank and head.startswith("Agent: ") and "\n" not in head else message
