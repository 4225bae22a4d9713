"""The agent's tools do what they say, and nothing outside the workspace."""

from __future__ import annotations

import asyncio
import os
import re
import time
from pathlib import Path

import pytest

from hilbert.agent.tools import ToolBox
from hilbert.commands import Limits, Output, Runner, Slots
from hilbert.models.types import ToolCall
from hilbert.settings import TimeoutSettings


def run(box: ToolBox, name: str, **arguments: object):
    return asyncio.run(box.run(ToolCall(id="c1", name=name, arguments=dict(arguments))))


@pytest.fixture
def box(tmp_path: Path) -> ToolBox:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "mod.py").write_text("def f(x):\n    return x + 1\n\n\ndef g(x):\n    return x + 1\n")
    (tmp_path / "secret.txt").write_text("outside")
    return ToolBox(ws, runner=Runner.unsandboxed(timeouts=TimeoutSettings(shell_s=5)), max_output_chars=200)


def test_read_file_with_line_range(box: ToolBox) -> None:
    out = run(box, "read_file", path="pkg/mod.py", start_line=2, end_line=2)
    assert not out.is_error
    assert out.content == "     2\t    return x + 1"


def test_edit_refuses_non_unique_and_missing_matches(box: ToolBox) -> None:
    dup = run(box, "edit_file", path="pkg/mod.py", old="return x + 1", new="return x")
    assert dup.is_error and "found 2 times" in dup.content
    missing = run(box, "edit_file", path="pkg/mod.py", old="nope", new="x")
    assert missing.is_error and "not found" in missing.content
    ok = run(
        box, "edit_file", path="pkg/mod.py", old="def g(x):\n    return x + 1", new="def g(x):\n    return x"
    )
    assert not ok.is_error
    assert (box.root / "pkg/mod.py").read_text().endswith("def g(x):\n    return x\n")


@pytest.mark.parametrize("path", ["../secret.txt", "pkg/../../secret.txt", "/etc/passwd"])
def test_paths_outside_the_workspace_are_refused(box: ToolBox, path: str) -> None:
    for name, extra in [
        ("read_file", {}),
        ("write_file", {"content": "x"}),
        ("edit_file", {"old": "a", "new": "b"}),
    ]:
        out = run(box, name, path=path, **extra)
        assert out.is_error and "outside the workspace" in out.content
    assert (box.root.parent / "secret.txt").read_text() == "outside"


def test_symlink_leading_outside_is_refused(box: ToolBox) -> None:
    os.symlink(box.root.parent / "secret.txt", box.root / "link.txt")
    out = run(box, "read_file", path="link.txt")
    assert out.is_error and "symlink" in out.content
    out = run(box, "write_file", path="link.txt", content="pwned")
    assert out.is_error
    assert (box.root.parent / "secret.txt").read_text() == "outside"


def test_absolute_path_inside_the_workspace_is_allowed(box: ToolBox) -> None:
    out = run(box, "read_file", path=str(box.root / "pkg" / "mod.py"))
    assert not out.is_error and "def f" in out.content


def test_write_then_list_and_grep(box: ToolBox) -> None:
    assert not run(box, "write_file", path="new/dir/a.py", content="needle = 1\n").is_error
    listed = run(box, "list_files", pattern="**/*.py")
    assert listed.content.splitlines() == ["new/dir/a.py", "pkg/mod.py"]
    assert run(box, "grep", pattern=r"needle\s*=").content == "new/dir/a.py:1:needle = 1"
    assert run(box, "list_files", pattern="../*").is_error


def test_shell_reports_exit_code_and_runs_in_the_workspace(box: ToolBox) -> None:
    out = run(box, "shell", command="pwd; exit 3")
    assert out.content.splitlines() == ["[exit 3]", str(box.root)]


def test_shell_does_not_see_api_keys(box: ToolBox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    fresh = ToolBox(box.root, runner=Runner.unsandboxed())
    out = run(fresh, "shell", command="echo key=${OPENAI_API_KEY:-none}")
    assert "key=none" in out.content


def test_shell_timeout_kills_the_command(box: ToolBox) -> None:
    out = run(box, "shell", command="sleep 30", timeout_s=1)
    assert out.is_error and out.content.startswith("[timed out after 1 s (timeouts.shell_s); killed]")


def test_long_output_is_capped_and_saved_whole(box: ToolBox) -> None:
    out = run(box, "shell", command="seq 1 2000")
    assert len(out.content) < 400
    saved = out.content.split("the whole output is in ")[1].split("]")[0]
    assert saved == ".hilbert/outputs/output-1.txt"
    assert run(box, "read_file", path=saved, start_line=2000).content.endswith("2000")
    first = run(box, "read_file", path=saved, start_line=1, end_line=3).content
    assert first == "     1\t1\n     2\t2\n     3\t3"


def test_bad_calls_come_back_as_tool_errors(box: ToolBox) -> None:
    assert run(box, "nope").is_error
    assert run(box, "read_file", wrong="x").is_error
    bad_json = asyncio.run(box.run(ToolCall(id="c", name="shell", raw_arguments="{not json")))
    assert bad_json.is_error and "not a JSON object" in bad_json.content
    assert run(box, "read_file", path="missing.py").is_error


def test_grep_and_list_files_do_not_follow_links_out_of_the_workspace(box: ToolBox) -> None:
    outside = box.root.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET=hunter2\n")
    os.symlink(outside / "secret.txt", box.root / "link.txt")
    os.symlink(outside, box.root / "linkdir")
    assert run(box, "grep", pattern="SECRET").content == "(no matches)"
    assert "hunter2" not in run(box, "grep", pattern="SECRET", glob="linkdir/*").content
    assert "secret" not in run(box, "list_files", pattern="linkdir/*").content
    for bad in ("../outside/*", "/etc/*", ""):
        assert run(box, "grep", pattern="x", glob=bad).is_error
        assert run(box, "list_files", pattern=bad).is_error


def test_a_symlink_loop_is_a_tool_error_not_a_crash(box: ToolBox) -> None:
    os.symlink(box.root / "loop2", box.root / "loop1")
    os.symlink(box.root / "loop1", box.root / "loop2")
    assert run(box, "read_file", path="loop1").is_error
    assert run(box, "grep", pattern="x", path="loop1").is_error
    assert not run(box, "list_files").is_error


def test_a_timed_out_command_keeps_the_output_it_printed(box: ToolBox) -> None:
    out = run(box, "shell", command="echo partial-output; sleep 30", timeout_s=1)
    expected = "[timed out after 1 s (timeouts.shell_s); killed]\npartial-output\n"
    assert out.is_error and out.content == expected


def test_background_children_do_not_outlive_the_call_or_hold_it_open(box: ToolBox) -> None:
    out = run(box, "shell", command="sleep 30 & echo $! > child.pid; echo started", timeout_s=5)
    assert out.content == "[exit 0]\nstarted\n"  # returned without waiting for the child's pipe
    pid = int((box.root / "child.pid").read_text())
    assert wait_until_gone(pid), f"background child {pid} still running"


def wait_until_gone(pid: int, within_s: float = 5.0) -> bool:
    """True once the process has died (gone, or a zombie waiting to be reaped)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.02)
    return False


def test_long_output_stays_bounded_in_memory_and_on_disk(tmp_path: Path) -> None:

    spill = tmp_path / "spill.txt"
    output = Output(keep=10, spill=lambda: (spill.open("wb"), "spill.txt"), max_saved=1000)
    for _ in range(500):
        output.add(b"0123456789")
    assert len(output.head) == len(output.tail) == 10 and output.total == 5000
    text = output.render()
    assert text.startswith(
        "0123456789\n[... 4,980 more bytes; the whole output is in spill.txt (cut at 1,000"
    )
    assert spill.stat().st_size == 1000


def test_overflow_is_never_written_through_a_link_out_of_the_workspace(box: ToolBox) -> None:
    outside = box.root.parent / "outside"
    outside.mkdir()
    os.symlink(outside, box.root / ".hilbert")
    out = run(box, "shell", command="seq 1 2000")
    assert "the whole output is in .hilbert/outputs/" in out.content and list(outside.iterdir()) == []


def test_tokens_and_secrets_are_removed_from_commands(box: ToolBox, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.setenv(name, "s3cret")
    out = run(ToolBox(box.root, runner=Runner.unsandboxed()), "shell", command="env")
    assert "s3cret" not in out.content


def test_zero_or_negative_timeouts_use_the_default(box: ToolBox) -> None:
    assert run(box, "shell", command="echo ok", timeout_s=0).content == "[exit 0]\nok\n"
    assert run(box, "shell", command="echo ok", timeout_s=-5).content == "[exit 0]\nok\n"


def test_the_timeout_holds_even_when_a_child_starts_its_own_session(box: ToolBox) -> None:
    started = time.monotonic()
    out = run(box, "shell", command="(setsid sleep 30 &); sleep 10", timeout_s=1)
    assert out.is_error and out.content.startswith("[timed out after 1 s (timeouts.shell_s); killed]")
    assert time.monotonic() - started < 5


def test_output_up_to_twice_the_kept_size_comes_back_whole(tmp_path: Path) -> None:

    spilled: list[str] = []
    output = Output(keep=10, spill=lambda: spilled.append("x") or None)
    for piece in (b"a" * 7, b"b" * 7, b"c" * 6):
        output.add(piece)
    assert output.render() == "a" * 7 + "b" * 7 + "c" * 6 and spilled == []


def test_a_file_between_one_and_two_halves_of_the_cap_comes_back_unchanged(box: ToolBox) -> None:
    (box.root / "mid.py").write_text("".join(f"v{n} = {n}\n" for n in range(1, 9)))
    out = run(box, "read_file", path="mid.py")  # ~130 chars: more than the 100-char head, less than 200
    assert out.content.splitlines() == [f"{n:>6}\tv{n} = {n}" for n in range(1, 9)]


def test_commands_are_held_to_their_cpu_and_memory_limits(tmp_path: Path) -> None:

    box = ToolBox(tmp_path, runner=Runner.unsandboxed(limits=Limits(cpu_s=1, memory_mb=200)))
    spin = run(box, "shell", command="python3 -c 'while True: pass'", timeout_s=20)
    assert spin.is_error and spin.content.startswith("[killed by SIGXCPU (its CPU-time limit)]")
    hog = run(box, "shell", command="python3 -c 'x = bytearray(500 * 1024 * 1024)'")
    assert "MemoryError" in hog.content


def test_command_slots_bound_how_many_commands_run_at_once(tmp_path: Path) -> None:
    async def main() -> int:
        slots = Slots(2)
        boxes = [ToolBox(tmp_path, runner=Runner.unsandboxed(slots=slots)) for _ in range(6)]
        log = tmp_path / "log"
        command = f"echo start >> {log}; sleep 0.3; echo end >> {log}"
        await asyncio.gather(
            *(b.run(ToolCall(id="c", name="shell", arguments={"command": command})) for b in boxes)
        )
        running = peak = 0
        for line in log.read_text().split():
            running += 1 if line == "start" else -1
            peak = max(peak, running)
        return peak

    assert asyncio.run(main()) == 2


# -- the tools a model expects: ripgrep's globs, read_file in whole-line pages --------------------------


@pytest.fixture
def src_layout(tmp_path: Path) -> ToolBox:
    """A project laid out as most libraries are: the package under src/, tests beside it, and the
    folders no one wants searched (a virtual environment, node_modules, hilbert's own outputs)."""
    files = {
        "pyproject.toml": "[project]\nname = 'pkg'\n",
        "README.md": "needle in the readme\n",
        "src/pkg/__init__.py": "",
        "src/pkg/mod.py": "def needle():\n    return 1\n",
        "src/pkg/sub/deep.py": "NEEDLE = needle = 2\n",
        "src/pkg/types.pyi": "def needle() -> int: ...\n",
        "tests/test_mod.py": "from pkg.mod import needle\n",
        ".venv/lib/site.py": "needle = 'from the venv'\n",
        "node_modules/x/index.py": "needle = 'from node_modules'\n",
        ".hilbert/notes.txt": "needle in hilbert's folder\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return ToolBox(tmp_path, runner=Runner.unsandboxed(), max_output_chars=2_000)


PY_FILES = ["src/pkg/__init__.py", "src/pkg/mod.py", "src/pkg/sub/deep.py", "tests/test_mod.py"]


def test_a_glob_without_a_slash_matches_at_any_depth_in_a_src_layout(src_layout: ToolBox) -> None:
    assert run(src_layout, "list_files", pattern="*.py").content.splitlines() == PY_FILES
    hits = run(src_layout, "grep", pattern=r"def needle|needle =", glob="*.py").content.splitlines()
    assert hits == ["src/pkg/mod.py:1:def needle():", "src/pkg/sub/deep.py:1:NEEDLE = needle = 2"]
    assert run(src_layout, "list_files", pattern="test_*.py").content == "tests/test_mod.py"
    assert run(src_layout, "list_files", pattern="*.{py,pyi}").content.splitlines() == sorted(
        [*PY_FILES, "src/pkg/types.pyi"]
    )


def test_a_glob_with_a_slash_is_anchored_and_double_star_spans_folders(src_layout: ToolBox) -> None:
    listed = run(src_layout, "list_files", pattern="src/**/*.py").content.splitlines()
    assert listed == PY_FILES[:3]
    assert run(src_layout, "list_files", pattern="src/*.py").content == "(no files match)"
    assert run(src_layout, "list_files", pattern="pkg/*.py").content == "(no files match)"
    assert run(src_layout, "list_files", pattern="tests/").content == "tests/test_mod.py"
    # within a folder given as `path`, an anchored glob may start at that folder or at the workspace
    for glob in ("pkg/sub/*.py", "src/pkg/sub/*.py", "**/sub/*.py"):
        out = run(src_layout, "grep", pattern="needle", path="src", glob=glob)
        assert out.content == "src/pkg/sub/deep.py:1:NEEDLE = needle = 2", glob


def test_virtual_environments_and_hilbert_folders_are_not_searched(src_layout: ToolBox) -> None:
    everything = run(src_layout, "list_files").content.splitlines()
    assert everything == sorted(["README.md", "pyproject.toml", *PY_FILES, "src/pkg/types.pyi"])
    found = run(src_layout, "grep", pattern="needle").content
    assert "venv" not in found and "node_modules" not in found and "hilbert's folder" not in found
    # named as the folder to search, hilbert's saved outputs can be searched
    run(src_layout, "shell", command="for n in $(seq 1 400); do echo needle $n in a saved output; done")
    saved = run(src_layout, "grep", pattern="needle 7 ", path=".hilbert/outputs")
    assert saved.content == ".hilbert/outputs/output-1.txt:7:needle 7 in a saved output"


@pytest.mark.parametrize(
    ("glob", "path", "matches"),
    [
        ("*.py", "a.py", True),
        ("*.py", "a/b/c.py", True),
        ("*.py", "a.pyc", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/pkg/a.py", False),
        ("src/*.py", "lib/src/a.py", False),
        ("src/**/*.py", "src/a.py", True),
        ("src/**/*.py", "src/x/y/a.py", True),
        ("**/test_*.py", "test_a.py", True),
        ("src/**", "src/x/y", True),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("?.py", "ab.py", False),
        ("[ab].py", "x/b.py", True),
        ("[!ab].py", "b.py", False),
        ("*.{py,md}", "docs/x.md", True),
        ("*.{py,md}", "x.txt", False),
        ("a+b(1).py", "a+b(1).py", True),
        (r"\*.py", "x.py", False),
        ("[unclosed.py", "[unclosed.py", True),
    ],
)
def test_globs_follow_ripgreps_rules(glob: str, path: str, matches: bool) -> None:
    from hilbert.agent.globs import glob_matcher

    assert glob_matcher(glob)(path) is matches


def test_a_long_file_is_read_in_whole_line_pages_without_gaps_or_overlaps(src_layout: ToolBox) -> None:
    text = [f"value_{n} = {'x' * (n % 70)}" for n in range(1, 1041)]
    (src_layout.root / "src/pkg/long.py").write_text("\n".join(text) + "\n")
    first = run(src_layout, "read_file", path="src/pkg/long.py").content.splitlines()
    shown = len(first) - 1
    assert first[-1] == f"[lines 1–{shown} of 1,040 shown; call read_file with start_line={shown + 1}]"
    following = f"{shown + 1:>6}\t{text[shown]}"  # the next line would not have fitted
    assert len("\n".join(first[:-1])) <= 2_000 < len("\n".join([*first[:-1], following]))
    read: list[str] = []
    start, pages = 1, 0
    while True:
        pages += 1
        page = run(src_layout, "read_file", path="src/pkg/long.py", start_line=start).content.splitlines()
        more = re.fullmatch(
            r"\[lines ([\d,]+)–([\d,]+) of 1,040 shown; call read_file with start_line=(\d+)\]", page[-1]
        )
        body = page[:-1] if more else page
        assert [int(line.split("\t")[0]) for line in body] == list(range(start, start + len(body)))
        read += [line.split("\t", 1)[1] for line in body]
        if not more:
            break
        start = int(more.group(3))
    assert read == text and pages > 10
    assert run(src_layout, "list_files", pattern=".hilbert/outputs/*").content == "(no files match)"


def test_a_range_is_read_in_pages_too_and_a_range_that_fits_has_no_footer(src_layout: ToolBox) -> None:
    (src_layout.root / "big.txt").write_text("".join(f"line {n:04}\n" for n in range(1, 1041)))
    cut = run(src_layout, "read_file", path="big.txt", start_line=100, end_line=900).content.splitlines()
    assert cut[0] == "   100\tline 0100" and cut[-1].startswith("[lines 100–")
    assert cut[-1].endswith(f" of 1,040 shown; call read_file with start_line={100 + len(cut) - 1}]")
    whole = run(src_layout, "read_file", path="big.txt", start_line=1030).content.splitlines()
    assert whole == [f"{n:>6}\tline {n:04}" for n in range(1030, 1041)]
    out = run(src_layout, "read_file", path="big.txt", start_line=2000)
    assert out.content == "(no lines in range 2000-end; the file has 1,040 lines)"


def test_a_line_longer_than_the_cap_is_shown_clipped_and_reading_goes_on(src_layout: ToolBox) -> None:
    (src_layout.root / "min.js").write_text("x" * 5_000 + "\nshort\nlast\n")
    first = run(src_layout, "read_file", path="min.js").content.splitlines()
    assert first[0].startswith("     1\txxx") and first[0].endswith("… [line clipped: 3,007 more chars]")
    assert first[1:] == ["[line 1 of 3 shown; call read_file with start_line=2]"]
    rest = run(src_layout, "read_file", path="min.js", start_line=2).content
    assert rest == "     2\tshort\n     3\tlast"


def test_grep_and_read_file_number_lines_alike(src_layout: ToolBox) -> None:
    (src_layout.root / "paged.py").write_text(
        "a = 1\f\nb = 2\nneedle = 3\n"
    )  # a form feed, as in old sources
    assert run(src_layout, "grep", pattern="needle", path="paged.py").content == "paged.py:3:needle = 3"
    assert run(src_layout, "read_file", path="paged.py", start_line=3).content == "     3\tneedle = 3"
