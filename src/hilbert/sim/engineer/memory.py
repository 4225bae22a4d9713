"""What the engineer still sees of the turns a restart does not replay.

When a compaction dropped a conversation's first turns, the responder replays the procedure from the
earliest turn it can (`responder.py`), often the last: the engineer starts over from what the
workspace holds. The turns before that one are still in front of it, and, as a person who lost the
start of their notes still reads the pages left, it takes in what they show instead of doing it again:

- the pages of files read there, with the edits made after them (no re-reading what it can see);
- the tries made there and put back (tried last this time, as an earlier attempt's are);
- the whole suite as it failed before the first edit (`work._before_first_edit`), when that run is there;
- the tries whose outcome it never saw (`unfinished`: no turn put them back, nor said the test
  passed or got further): put back first, or it would read a wrong try as the code and search on
  top of it (cachetools' `LFUCache`, seed 18: `-= 0` -> `+= 0` taken for the code).

Read from hilbert's own tools (`read_file`, `edit_file`, `shell`) and the engineer's own words; from
another dialect's turns nothing is remembered (the engineer starts over as before).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hilbert.context.tried import TriedEdit, first_change, tried_edits
from hilbert.models.types import Message
from hilbert.sim.engineer.actions import Edit, Observation, Read

TRY = "Maybe a "  # how the engineer words a candidate edit (`work._try`)
KEPT = ("That test passes now", "That test gets further now")  # ... and the outcome of one it keeps
BASELINE = "Running the whole suite before I change anything"  # `work._before_first_edit`


@dataclass(frozen=True)
class Memory:
    events: tuple[tuple[Read | Edit, Observation], ...] = ()  # reads and edits, in order
    tried: tuple[TriedEdit, ...] = ()
    unfinished: tuple[Edit, ...] = ()  # newest first: the order to put them back in
    wide_before: Observation | None = None


def remember(messages: Sequence[Message], observations: Sequence[Observation]) -> Memory:
    """What `messages` (a conversation up to a turn) show; `observations[i]` answered its i-th turn."""
    turns = [m for m in messages if m.role == "assistant"]
    events: list[tuple[Read | Edit, Observation]] = []
    wide_before = None
    for turn, observation in zip(turns, observations, strict=False):
        for call in turn.tool_calls[:1] if observation.ran else ():  # one call a turn
            args = call.arguments
            if call.name == "read_file" and isinstance(path := args.get("path"), str):
                first, last = (args.get(key) for key in ("start_line", "end_line"))
                first, last = (n if isinstance(n, int) else None for n in (first, last))
                events.append((Read(path, first, last), observation))
            elif call.name == "edit_file" and (edit := _edit(args)) is not None:
                events.append((edit, observation))
            elif call.name == "shell" and turn.content.startswith(BASELINE) and observation.ran:
                wide_before = observation
    unfinished = unfinished_tries(turns, observations)
    return Memory(tuple(events), tuple(tried_edits(messages)), tuple(unfinished), wide_before)


def unfinished_tries(turns: Sequence[Message], observations: Sequence[Observation]) -> list[Edit]:
    """The engineer's candidate edits in `turns` (`edit_file`, its words "Maybe a ... bug: trying")
    still in place at their end whose outcome it never saw: no later turn put the line back, nor said
    "That test passes now" / "gets further now" (a try it kept), nor ran a command that passed after
    it (the test it re-ran passed: it would have kept it). Newest first: how to undo them. An edit
    tool's refusal is not told apart: undoing an edit never made is refused in turn."""
    open_: list[tuple[TriedEdit, Edit]] = []
    for turn, observation in zip(turns, observations, strict=False):
        if turn.content.strip().startswith(KEPT):
            open_.clear()  # the try before it was kept
        if any(call.name == "shell" for call in turn.tool_calls) and observation.exit_code == 0:
            open_.clear()  # ... or is about to be: its test passed
        for call in turn.tool_calls:
            edit = _edit(call.arguments) if call.name == "edit_file" else None
            if edit is None:
                continue
            change = first_change(edit.path, edit.old, edit.new)
            undone = next((pair for pair in open_ if change.undoes(pair[0])), None)
            if undone is not None:
                open_.remove(undone)
            elif turn.content.strip().startswith(TRY):
                open_.append((change, edit))
    return [edit for _change, edit in reversed(open_)]


def _edit(arguments: dict[str, object]) -> Edit | None:
    path, old, new = (arguments.get(key) for key in ("path", "old", "new"))
    if isinstance(path, str) and isinstance(old, str) and isinstance(new, str):
        return Edit(path, old, new)
    return None
