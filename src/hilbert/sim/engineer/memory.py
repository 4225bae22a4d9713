"""What the engineer still sees of the turns a restart does not replay.

When a compaction dropped a conversation's first turns, the responder replays the procedure from the
earliest turn it can (`responder.py`), often the last: the engineer starts over from what the
workspace holds. The turns before that one are still in front of it, and, as a person who lost the
start of their notes still reads the pages left, it takes in what they show instead of doing it again:

- the pages of files read there, with the edits made after them (no re-reading what it can see);
- the tries made there and put back (tried last this time, as an earlier attempt's are);
- the whole suite as it failed before the first edit (`work._before_first_edit`), when that run is there;
- the tries whose outcome it never saw settled (`unfinished_tries`): put back first, or it would read
  a wrong try as the code and search on top of it (cachetools' `LFUCache`, seed 18: `-= 0` -> `+= 0`
  taken for the code). A try whose own test passed counts as kept before the whole suite is checked
  (a fix it undid was recorded as tried in vain, and later attempts tried it last); the merge queue
  still refuses one that breaks another test. The undo itself is recorded as a try put back (in the
  pinned state and the next attempt's list): a right fix undone so is tried again, but last.

Read from hilbert's own tools (`read_file`, `edit_file`, `shell`) and the engineer's own words; from
another dialect's turns nothing is remembered (the engineer starts over as before).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hilbert.context.tried import TriedEdit, first_change, tried_edits
from hilbert.models.types import Message
from hilbert.sim.engineer.actions import Edit, Observation, Read, made

TRY = "Maybe a "  # how the engineer words a candidate edit (`work._try`)
KEPT = ("That test passes now", "That test gets further now")  # ... and the outcome of one it keeps
BASELINE = "Running the whole suite before I change anything"  # `work._before_first_edit`
CHECKING = "Checking that nothing else broke"  # `work._breaks_elsewhere`


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
    still in place at their end whose outcome it never saw settled: no later turn put the line back,
    and the test it re-ran did not pass (a command that passed after it, or its words "That test
    passes now": it keeps such a fix), nor did it go on to other work after saying "That test gets
    further now" (kept only once the suite shows nothing else broke: a cut before that left a wrong
    step in, cachetools seed 18). Newest first: how to undo them. An edit the tool refused is none."""
    open_: list[tuple[TriedEdit, Edit]] = []
    further = False  # the newest try got its test further: kept unless the next turns put it back
    for turn, observation in zip(turns, observations, strict=False):
        if not observation.ran:  # answered "not run" (a resumed conversation): it is made again later
            continue
        words = turn.content.strip()
        edits = [_edit(call.arguments) if call.name == "edit_file" else None for call in turn.tool_calls]
        changes = [(first_change(e.path, e.old, e.new), e) for e in edits if e and made(e, observation)]
        puts_back = bool(open_) and any(change.undoes(open_[-1][0]) for change, _e in changes)
        if further and not words.startswith(CHECKING) and not puts_back:
            open_.clear()  # it went on to other work: the step was kept
        passed = any(call.name == "shell" for call in turn.tool_calls) and observation.exit_code == 0
        if words.startswith(KEPT[0]) or passed:
            open_.clear()  # the try before it passed its test: kept
        further = words.startswith(KEPT[1]) or (further and words.startswith(CHECKING))
        for change, edit in changes:
            undone = next((pair for pair in open_ if change.undoes(pair[0])), None)
            if undone is not None:
                open_.remove(undone)
            elif words.startswith(TRY) and not any(change.same_change(pair[0]) for pair in open_):
                open_.append((change, edit))
    return [edit for _change, edit in reversed(open_)]


def _edit(arguments: dict[str, object]) -> Edit | None:
    path, old, new = (arguments.get(key) for key in ("path", "old", "new"))
    if isinstance(path, str) and isinstance(old, str) and isinstance(new, str):
        return Edit(path, old, new)
    return None
