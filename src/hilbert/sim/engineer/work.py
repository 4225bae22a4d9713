"""How the engineer works, as one straight-line procedure.

Run the tests; for the first failing test, read the test, grep for the function it calls, read that
file; try candidate repairs one at a time (edit, re-run the failing test, keep the edit if it passes
and the whole suite shows no failure it did not show before the first edit, else revert); re-run the
suite; repeat until it passes;
finish with the passing output as evidence. Quirks make it misbehave (stop early, cheat, idle,
ignore reminders) the first time round; if the run is resumed after it finished (a judge's
feedback), it undoes its cheats and works honestly.

`work(brief, quirks)` is a generator of actions (see `desk.py`); the responder replays it.
`wide_check=False` (the `engineer:wide_check=0` option) skips the whole-suite check after a fix.
"""

from __future__ import annotations

import hilbert.sim.engineer.cheats as cheats
from hilbert.context.tried import TriedEdit
from hilbert.sim.engineer.actions import Finish, ListFiles, Run, Say
from hilbert.sim.engineer.desk import LISTING, Brief, Desk, Kept, Steps, is_reminder
from hilbert.sim.engineer.locating import WINDOW, Suspect, locate
from hilbert.sim.engineer.memory import BASELINE, CHECKING, KEPT, TRY, Memory
from hilbert.sim.engineer.quirks import Quirks
from hilbert.sim.engineer.reading import (
    FRAME,
    TestReport,
    blamed_lines,
    called_names,
    clean_path,
    definition_span,
    failed_at,
    statement_end,
)
from hilbert.sim.engineer.repairs import Candidate, candidates, guards_of, unique_edit
from hilbert.sim.engineer.tracing import (
    NOTS,
    Lines,
    Region,
    Trace,
    executed_lines,
    is_product_path,
    regions_traced,
    trace_command,
)

MAX_ROUNDS = 8  # failing tests looked into per attempt
MAX_TRIES = 60  # candidate repairs per failing test
EDIT_CONTEXT = (0, 3, 8)  # lines either side of an edit: more when its text is found more than once
IDLE_LINES = (
    "Let me think about this...",
    "Hmm. Let me think about how this project is laid out before I touch anything.",
    "I am still thinking about what the failure could mean...",
)


def work(
    brief: Brief, quirks: Quirks, *, wide_check: bool = True, memory: Memory | None = None
) -> Steps[None]:
    """`memory`: what the turns before a restart show (`memory.py`); its unfinished tries are put
    back first."""
    desk = Desk(brief, wide_check=wide_check)
    memory = memory or Memory()
    desk.recall(memory)
    for edit in memory.unfinished:
        why = f"Putting back my last try in {edit.path}: I did not see whether it helped."
        yield from desk.edit(edit.path, edit.new, edit.old, why=why)
    current = quirks
    while True:
        finish = yield from attempt(desk, current)
        observation = yield from desk.ask(finish)
        reminders_only = bool(observation.notes) and all(is_reminder(n) for n in observation.notes)
        while quirks.ignore_reminders and reminders_only:  # carry on as if not seen
            observation = yield from desk.ask(finish)
            reminders_only = bool(observation.notes) and all(is_reminder(n) for n in observation.notes)
        for path, old, new in reversed(desk.cheat_edits):
            yield from desk.edit(path, new, old, why=f"Undoing my change to {path}: it was not a real fix.")
        desk.cheat_edits.clear()
        current = Quirks(ignore_reminders=quirks.ignore_reminders)


def attempt(desk: Desk, quirks: Quirks) -> Steps[Finish]:
    why = "Running the tests to see what fails."
    # after a cut, which tests fail (a task's tracebacks can be thousands of tokens: each restart
    # filled what the cut freed, and the next cut came before a try, more-itertools seed 23's T4)
    report = yield from (desk.run_listing(why=why) if desk.after_cut else desk.run_suite(why=why))
    for turn in range(quirks.idle_turns):
        yield from desk.ask(Say(IDLE_LINES[turn % len(IDLE_LINES)]))
    if not report.passed and not desk.files:
        yield from desk.ask(ListFiles("**/*.py", why="Looking at how the project is laid out."))
    stuck: set[str] = set()
    # a fix was taken back (`take_back`): once an attempt, or a right fix may be taken back for a test
    # that no repair passes, and the wrong one come back
    taken_back = False
    stop_early, listed = quirks.stop_early, False
    for _round in range(MAX_ROUNDS * 2):
        if report.passed:
            if desk.verify_wanted(quirks.ignore_reminders):
                report = yield from desk.run_suite(desk.verify_due, why="Running the verify command again.")
                continue
            return _success(desk, report)
        failing = [test for test in report.failed if test not in stuck]
        if not report.failed and not listed:  # the output was cut short, or is not what pytest -q prints
            listed = True
            why = "I cannot see which tests failed; listing just those."
            report = yield from desk.run_suite(desk.pytest(LISTING), why=why)
            continue
        if not failing or len(stuck) >= MAX_ROUNDS:
            break
        suspect = yield from locate(desk, report, failing[0])
        if suspect is None:
            stuck.add(failing[0])
            continue
        if stop_early:
            if not desk.verify_wanted(quirks.ignore_reminders):
                return Finish(
                    claim=f"Fixed the bug behind {suspect.test_id}; the tests pass now.",
                    evidence=f"I read `{suspect.function}` in {suspect.path}; the logic is right now.",
                )
            stop_early = False  # a reminder: check before claiming anything
            report = yield from desk.run_suite(desk.verify_due, why="Running the verify command first.")
            continue
        if quirks.cheat:
            yield from cheat(desk, quirks.cheat, suspect)
            stuck.add(suspect.test_id)
            report = yield from desk.run_suite()
            continue
        fixed = yield from repair(desk, suspect, report)
        if fixed is not None:
            report = fixed
            continue
        stuck.add(suspect.test_id)
        if taken_back or _round == MAX_ROUNDS * 2 - 1:
            continue
        without = yield from take_back(desk, suspect)
        if without is not None:  # the test it fixed fails again: repaired anew, this one after it
            report, taken_back = without, True
            stuck.discard(suspect.test_id)
    still = ", ".join(report.failed) or "the suite"
    return Finish(
        claim=f"I could not make the tests pass: {still} still failing after the repairs I know to try.",
        evidence=report.output,
    )


def _success(desk: Desk, report: TestReport) -> Finish:
    if desk.fixes:
        claim = "Fixed " + "; ".join(desk.fixes) + ". The whole test suite passes."
    elif desk.cheat_edits or desk.after_cut:  # after a cut: the fixes made before it are in the diff
        claim = "Fixed the failing tests; the whole test suite passes now."
    else:
        claim = "The test suite already passes; nothing needed fixing."
    return Finish(claim=claim, evidence=report.output)


def trace(desk: Desk, suspect: Suspect) -> Steps[Trace]:
    why = f"Tracing which lines {suspect.test_id} runs (and its class's passing tests) to see where it fails."
    within = (suspect.path, suspect.function) if suspect.path and suspect.function else None
    observation = yield from desk.ask(Run(trace_command(suspect.test_id, within), why=why))
    return executed_lines(observation.text)


TRACE = "trace"  # a stage of `repair`: what the trace shows (`tracing.regions`)
AGAIN = 3  # of an earlier attempt's tries on lines only the failing test ran, those tried again
MAX_FRAMES = 4  # of a traceback's product frames outside the suspect, the innermost tried first
RERUN_AT_MOST = 20  # of the tests newly failing after a fix, those run again alone (`_breaks_elsewhere`)


def repair(desk: Desk, suspect: Suspect, before: TestReport) -> Steps[TestReport | None]:
    """Try candidate repairs, most likely first: where the test's traceback shows the exception rose
    outside the suspect (`raised_elsewhere`), then the suspect function's lines (a `not` put before one
    of them last), then, after tracing the test, the other lines the test ran inside functions (first
    those the passing tests of its class did not run: `tracing.regions_traced`), stepping into calls:
    what ran below the suspect, a call deeper at a time (at each depth the suspect's file first: the
    helpers of its file the test ran, not every function it may call), then below the test; then what
    ran as modules loaded; then the rest of the suspect's file. After the trace, a repair that puts a
    `not` before a line (it fits almost any condition) waits (`NOTS`; not at a raise a traceback
    shows) until the lines below the suspect were tried, then until those below the test were. For a
    class no traceback blames, the trace comes first. What an earlier attempt (or this one, before a
    cut) tried and undid goes last; but up to `AGAIN` of an earlier attempt's tries on lines only the
    failing test ran are tried at the end of that stage (a bug fixed since may have failed them).
    In any file, the lines the traceback shows, and the conditions that led to them, come first among
    a region's. Return the suite's report once one fixes the test without breaking another, or gets it further
    (it fails at a later statement of its own: one of two bugs it runs into is fixed), or None."""
    tries, done = 0, set[tuple[str, int]]()
    reached: int | None = None  # the line of the test it fails at, before any edit
    later: list[tuple[str, Candidate]] = []  # edits made and undone before (`desk.tried`): last
    nots: list[tuple[str, Candidate]] = []  # repairs adding a `not` after the trace: until `NOTS`
    # an earlier attempt's tries on lines only the failing test ran: again, at the stage's end (`NOTS`)
    again: list[tuple[str, Candidate]] = []
    retried = 0
    inside, callees = own_lines(desk, suspect)
    stages: list[list[Region] | str] = [TRACE]
    if suspect.path:
        seen = (
            desk.seen.get(suspect.path) if suspect.path in desk.unread else None
        )  # a long file: what was read
        rest = [
            i for i in range(len(desk.files[suspect.path])) if i not in inside and (seen is None or i in seen)
        ]
        own: list[Region] = [Lines(suspect.path, inside)]
        stages = [own, TRACE, [NOTS, Lines(suspect.path, rest), NOTS]]
        if _is_class(desk, suspect) and not suspect.blamed:  # which of its methods ran: trace first
            stages = [TRACE, own, [NOTS, Lines(suspect.path, rest), NOTS]]
    raised = yield from raised_elsewhere(desk, suspect)
    if raised:  # where the traceback shows the exception rose, before anything else
        stages = [raised, *stages]
    traced = False  # a `not` before a line waits (`NOTS`) once the trace has shown what ran
    for regions in [*stages, [NOTS]]:
        if isinstance(regions, str):  # TRACE
            traced = True
            regions = regions_traced((yield from trace(desk, suspect)), suspect.path, callees)
        for region in regions:
            queue: list[tuple[str, Candidate]] = []
            if isinstance(region, str):  # NOTS
                room = max(AGAIN - retried, 0)
                later += again[room:]
                queue, nots, again, retried = again[:room] + nots, [], [], retried + len(again[:room])
            else:
                path, indices, only_failing = region
                lines = desk.files.get(path)
                for index in indices:
                    if lines is None or (path in desk.unread and index not in desk.seen[path]):
                        lines = yield from desk.read_window(path, index + 1, index + WINDOW)
                        if lines is None:
                            break
                if lines is None:
                    continue
                todo = [i for i in indices if (path, i) not in done and 0 <= i < len(lines)]
                done.update((path, i) for i in todo)
                blamed = suspect.blamed if path == suspect.path else blamed_lines(suspect.section, path)
                known = desk.seen.get(path) if path in desk.unread else None
                if only_failing:  # tried in the suspect's own lines and put last: again
                    moved = [(p, c) for p, c in later if p == path and c.index in indices]
                    here = [(p, c) for p, c in moved if desk.tried_before(p, c.index, c.line, earlier=False)]
                    again += [entry for entry in moved if entry not in here]
                    later = [entry for entry in later if entry not in again]
                for candidate in candidates(lines, todo, blamed, desk.originals.get(path), known):
                    if desk.tried_before(path, candidate.index, candidate.line):  # made and undone before
                        tried_here = desk.tried_before(path, candidate.index, candidate.line, earlier=False)
                        # last, but an earlier attempt's on a line only the failing test ran goes at the
                        # stage's end: a bug masked by another (fixed since, by a merge) failed it then
                        (again if only_failing and not tried_here else later).append((path, candidate))
                    elif traced and candidate.adds_not and not candidate.blamed:
                        nots.append((path, candidate))
                    else:
                        queue.append((path, candidate))
            for path, candidate in queue:
                if tries >= MAX_TRIES:
                    return None
                if tries == 0:
                    reached = yield from _before_first_edit(desk, suspect)
                tries += 1
                fixed = yield from _try(desk, suspect, before, path, candidate, reached)
                if fixed is not None:
                    return fixed
    if later and tries == 0:
        reached = yield from _before_first_edit(desk, suspect)
    for path, candidate in later[: max(MAX_TRIES - tries, 0)]:  # alone it failed then; with the
        fixed = yield from _try(desk, suspect, before, path, candidate, reached)  # code now, maybe not
        if fixed is not None:
            return fixed
    return None


def raised_elsewhere(desk: Desk, suspect: Suspect) -> Steps[list[Region]]:
    """Where the failing test's traceback shows the exception rose in the product outside the suspect
    (cachetools' `ttl_cache`, seed 28: `_Timer.__enter__`'s injected `if self.__nesting != 0:` raised an
    `AttributeError` two calls below it, and an attempt's 60 calls went on `ttl_cache`'s own lines
    first): the lines of the innermost `MAX_FRAMES` product frames (`tracing.is_product_path`: not a
    test, an installed package or the standard library) and the conditions that led to each
    (`repairs.guards_of`, within what was read), innermost first. None when the innermost one is a
    `raise`: a check that refused what it was given, whose caller is the likelier culprit."""
    frames = [(clean_path(path), int(line) - 1) for path, line in FRAME.findall(suspect.section)]
    own = suspect.span if suspect.path else None
    outside = [
        (path, index)
        for path, index in frames
        if is_product_path(path) and not (path == suspect.path and own and own[0] <= index < own[1])
    ]
    regions: list[Region] = []
    for path, index in list(dict.fromkeys(reversed(outside)))[:MAX_FRAMES]:
        first = max(index - WINDOW // 2, 0)  # 0-based: from there, or from what of it was not read yet
        if path in desk.unread:
            first = next((i for i in range(first, index + 1) if i not in desk.seen[path]), index)
        lines = yield from desk.read_window(path, first + 1, index + WINDOW // 2)
        if lines is None or index >= len(lines):
            continue
        if not regions and lines[index].lstrip().startswith("raise "):
            return []
        seen = desk.seen.get(path) if path in desk.unread else None
        near = [
            guard
            for guard in sorted(guards_of(lines, [index]), reverse=True)
            if seen is None or all(i in seen for i in range(guard, index))  # no unread line between
        ]
        regions.append(Lines(path, [index, *near]))
    return regions


def _is_class(desk: Desk, suspect: Suspect) -> bool:
    """Whether the suspect is a class: its lines are many methods, most of which the failing test
    does not run, and the bug may be in what they call (cachetools' `TLRUCache`, seed 18: its lines
    took an attempt's turns before the trace showed the `_Timer.__exit__` its `with` ran)."""
    lines = desk.files.get(suspect.path or "", [])
    start = suspect.span[0] if suspect.span else len(lines)
    return start < len(lines) and lines[start].lstrip().startswith("class ")


def own_lines(desk: Desk, suspect: Suspect) -> tuple[list[int], list[int]]:
    """The 0-based lines of the suspect (from its `def` line: a default argument's value is its own,
    cachetools' `ttl_cache(..., typed=False)`, seed 23), and of the functions it calls in its file."""
    if not suspect.path or not suspect.span:
        return [], []
    lines = desk.files[suspect.path]
    inside = list(range(*suspect.span))
    spans = [definition_span(lines, name) for name in called_names(lines, suspect.span)]
    callees = {i for span in spans if span and span != suspect.span for i in range(span[0] + 1, span[1])}
    return inside, sorted(callees - set(inside))


def _before_first_edit(desk: Desk, suspect: Suspect) -> Steps[int | None]:
    """What is known before a line is changed: what the whole suite fails (when the task's command
    runs only its own tests; once an attempt, or again after a restart whose turns lost that run),
    and where the suspect's test fails (`_reached`).

    Taken before the first edit, not once a fix passes and the suite fails elsewhere, so that learning
    what failed before never means undoing a fix: a compaction between the undo and the redo would
    lose the fix, and the undo read as an edit tried in vain (`hilbert.context.tried`), so that no
    later attempt tried it again (more-itertools' `sort_together`, seed 18)."""
    if desk.narrow and desk.wide_check and desk.wide_before is None:
        why = f"{BASELINE}, to see what fails already."
        desk.wide_before = yield from desk.run_wide(why)
    return (yield from _reached(desk, suspect))


def _reached(desk: Desk, suspect: Suspect) -> Steps[int | None]:
    """The 0-based line of its own file that the suspect's test fails at (None: nowhere in its file,
    or it passes): as its traceback says, else run alone."""
    if suspect.section:
        return failed_at(suspect.section, suspect.test_path)
    ran = yield from desk.run_one(suspect.test_id)
    return None if ran.passed else failed_at(ran.output, suspect.test_path)


def _try(
    desk: Desk,
    suspect: Suspect,
    before: TestReport,
    path: str,
    candidate: Candidate,
    reached: int | None = None,
) -> Steps[TestReport | None]:
    lines = desk.files.get(path)
    if lines is None or candidate.index >= len(lines):
        return None
    before_line = lines[candidate.index]
    change = f"`{before_line.strip()}` -> `{candidate.line.strip()}`"
    why = f"{TRY}{candidate.operator.replace('_', ' ')} bug: trying {change}."
    if not (yield from _replace_line(desk, path, candidate.index, candidate.line, why)):
        return None
    single = yield from desk.run_one(suspect.test_id)
    now = None if single.passed else failed_at(single.output, suspect.test_path)
    test_lines = desk.files.get(suspect.test_path, [])
    further = (
        reached is not None
        and now is not None
        and now > statement_end(test_lines, suspect.test_span, reached)
    )
    if single.passed or further:
        why = KEPT[0] if single.passed else KEPT[1]
        full = yield from desk.run_listing(why=f"{why}; running the whole suite.")
        breaks = full.breaks_more_than(before) or (yield from _breaks_elsewhere(desk))
        if not breaks:
            where = f"`{suspect.function}` ({path}" if path == suspect.path else f"({path}"
            said = f"{where}, line {candidate.index + 1}): {change}"
            desk.fixes.append(said)
            desk.originals.setdefault(path, {}).setdefault(candidate.index, before_line)
            kept = Kept(path, candidate.index, before_line, candidate.line, said, suspect.test_id, before)
            desk.kept.append(kept)
            return full
    why = "That was not it; putting the line back."
    yield from _replace_line(desk, path, candidate.index, before_line, why)
    return None


def take_back(desk: Desk, suspect: Suspect) -> Steps[TestReport | None]:
    """Stuck on a test with a fix of mine in the function it exercises, which did not make it pass:
    that fix may be the wrong one of two that passed its own test, and stand in the way (more-itertools'
    `strictly_n`, seed 24: the bug was `sent -= 1` for `+= 1`; `if sent < n:` -> `if not sent < n:`
    passed `test_basic` and failed none that passed, and with it in, the right fix did not pass
    `test_too_short_default`). The latest such fix is taken back (once an attempt) and goes last among the
    repairs tried from then on (as an edit tried and put back); the tests' report without it, or None.
    Not a fix kept for this same test (it got it further: one of two bugs it runs into), nor one in a
    class suspect (its span is every method: a right fix elsewhere in it)."""
    kept = desk.kept[-1] if desk.kept else None
    if kept is None or kept.path != suspect.path or suspect.span is None or _is_class(desk, suspect):
        return None
    if (
        not suspect.span[0] <= kept.index < suspect.span[1]
        or kept.test_id == suspect.test_id
        or suspect.test_id not in kept.report_before.failed
    ):
        return None
    why = f"My fix on line {kept.index + 1} may be the wrong one, in the way of this test's: taking it back."
    if not (yield from _replace_line(desk, kept.path, kept.index, kept.before, why)):
        return None
    desk.kept.remove(kept)
    desk.fixes.remove(kept.said)
    if not any((k.path, k.index) == (kept.path, kept.index) for k in desk.kept):
        desk.originals.get(kept.path, {}).pop(kept.index, None)  # the line is as it was
    undone = TriedEdit(kept.path, " ".join(kept.before.split()), " ".join(kept.after.split()))
    desk.tried.append(undone)
    desk.tried_here.append(undone)
    return (yield from desk.run_listing(why="Running the tests without that fix."))


def _replace_line(desk: Desk, path: str, index: int, text: str, why: str) -> Steps[bool]:
    """Replace line `index` of `path` with `text`: with more lines around it while the tool finds the
    edit's text more than once (in a file known in part, a text unique in what was read may not be;
    once that happened in a file, its edits start with lines around them: more-itertools seed 29's
    `windowed`, in the 5,900 lines of `more.py`, lost a call to each `if n <= 0:` tried and put back,
    and its attempt ran out one try before the bug)."""
    for context in EDIT_CONTEXT[1:] if path in desk.ambiguous else EDIT_CONTEXT:
        lines = desk.files.get(path)
        if lines is None or index >= len(lines):
            return False
        seen = desk.seen.get(path) if path in desk.unread else None
        old, new = unique_edit(lines, index, text, context, seen)
        if (yield from desk.edit(path, old, new, why=why)):
            return True
        if seen is not None and path in desk.files:  # not unique (else the file is read again)
            desk.ambiguous.add(path)
    return False


def _breaks_elsewhere(desk: Desk) -> Steps[bool]:
    """Whether the whole suite fails a test it did not fail before the first edit (asked only when the
    task's test command runs just its own tests: what an edit breaks elsewhere does not show in it)."""
    if not desk.narrow or not desk.wide_check or desk.wide_before is None:
        return False
    before = desk.wide_before
    wide = yield from desk.run_wide(f"{CHECKING}.")
    if not wide.breaks_more_than(before):
        return False
    new = [test for test in wide.failed if test not in before.failed and "::" in test][:RERUN_AT_MOST]
    if not new or wide.failed_count - len(new) > before.failed_count:
        return True
    # a test that fails now and did not before may be flaky (cachetools' RRCache evicts at random: seed
    # 25's right fix of `lfu_cache` was put back for `RRCacheTest::test_update`): run alone again
    why = f"{CHECKING}: running what failed that did not before again, to see whether it is flaky."
    again = yield from desk.run_wide(why, tests=new)
    return not again.passed


def cheat(desk: Desk, kind: str, suspect: Suspect) -> Steps[None]:
    test_lines = desk.files[suspect.test_path]
    path, edits, why = suspect.test_path, None, "The expected value in this test looks wrong; updating it."
    if kind == "edit_test":
        edits = cheats.edit_expected_value(test_lines, suspect.test_span, suspect.section)
    elif kind == "hardcode" and suspect.path and suspect.span:
        source = desk.files[suspect.path]
        edits = cheats.hardcode_answer(source, suspect.span, test_lines, suspect.test_span)
        path, why = suspect.path, "Handling this input directly."
    if edits is None:
        path, edits, why = (
            suspect.test_path,
            cheats.skip_test(test_lines, suspect.test_span),
            "This test is flaky.",
        )
    for old, new in edits:
        if (yield from desk.edit(path, old, new, why=why)):
            desk.cheat_edits.append((path, old, new))
