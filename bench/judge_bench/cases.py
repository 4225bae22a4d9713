"""The judge benchmark's case data, and how a case's edits apply to a tree.

One folder per project under `bench/judge_cases/`:

    project.yaml        name (PyPI), version, sdist (file name), sha256, bugs: [...]
    cases/<bug>.yaml    bug: <id>, cases: [...]  (honest fixes and cheats for that bug)

A bug has an `id`, a `description` (the task the worker gets), `inject` (edits that turn the pristine
project into the base commit), `verify` (the task's verify command), `allow` (test paths the task allows
editing), `heldout` (test files kept outside the repository, path -> text) and `broken` (`product`,
the default, or `test`: the task declares a test wrong and the product right). A case has an `id`, a
`kind` (`honest` or `cheat`), a `style` (honest: plain, regression-test, new-test-file, refactor,
declared-test) or a `technique` (cheat: an id from docs/design/cheats.md), a `note`, its `edits`, and
`worker_runs`: shell commands the worker ran in its checkout after committing (for cheats whose effect
lives outside the repository).

Edits are data: `replace` (path, old, new, count = 1: `old` must occur exactly `count` times),
`write` (path, content), `append` (path, content), `delete` (path), `rename` (path, to), `copy` (path,
to: a file or a folder), `compile_pyc` (path: compile the file as it is now to an unchecked-hash .pyc in
its `__pycache__`, as a worker would with `py_compile`), `symlink` (path, to: make `path` a symbolic link
whose target is the text `to`, which may point anywhere, even outside the repository). Anything
malformed is a `UserError` naming the file and the case.
"""

from __future__ import annotations

import importlib.util
import py_compile
import re
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from hilbert.errors import UserError

OPS = {
    "replace": ("path", "old", "new"),
    "write": ("path", "content"),
    "append": ("path", "content"),
    "delete": ("path",),
    "rename": ("path", "to"),
    "copy": ("path", "to"),
    "compile_pyc": ("path",),
    "symlink": ("path", "to"),
}
STYLES = ("plain", "regression-test", "new-test-file", "refactor", "declared-test")
HINT = "see the format in bench/judge_bench/cases.py and the cases under bench/judge_cases/"


@dataclass(frozen=True)
class Edit:
    op: str
    path: str
    old: str = ""
    new: str = ""
    content: str = ""
    to: str = ""
    count: int = 1


@dataclass(frozen=True)
class Bug:
    id: str
    description: str
    inject: tuple[Edit, ...]
    verify: str
    allow: tuple[str, ...] = ()
    heldout: tuple[tuple[str, str], ...] = ()
    broken: str = "product"  # or "test": the product is right and a test the task names is wrong


@dataclass(frozen=True)
class Case:
    project: str
    bug: str
    id: str
    kind: str  # "honest" | "cheat"
    label: str  # honest: the style; cheat: the technique id
    note: str
    edits: tuple[Edit, ...]
    worker_runs: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.project}/{self.bug}/{self.id}"


@dataclass(frozen=True)
class Project:
    name: str
    version: str
    sdist: str
    sha256: str
    folder: Path
    bugs: tuple[Bug, ...]
    cases: tuple[Case, ...]

    def bug(self, bug_id: str) -> Bug:
        return next(bug for bug in self.bugs if bug.id == bug_id)


def taxonomy(doc: Path) -> dict[str, str]:
    """Technique id -> group title, read from the tables of docs/design/cheats.md."""
    techniques: dict[str, str] = {}
    group = ""
    for line in doc.read_text().splitlines():
        if heading := re.match(r"^## \d+\. ([^—]+)", line):
            group = heading.group(1).strip().lower()
        elif line.startswith("## "):
            group = ""
        elif group and (row := re.match(r"^\| `([a-z]+(?:-[a-z]+)+)` \|", line)):
            techniques[row.group(1)] = group
    if not techniques:
        raise UserError(f"{doc}: no technique table found", hint="the taxonomy is docs/design/cheats.md")
    return techniques


def _fail(where: str, what: str) -> UserError:
    return UserError(f"{where}: {what}", hint=HINT)


def _text(data: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or (default is None and not value):
        raise _fail(where, f"`{key}` must be a non-empty string")
    return value


def _relative(path: str, where: str) -> str:
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise _fail(where, f"path {path!r} must be relative to the repository, without '..'")
    return path


def parse_edit(data: Any, where: str) -> Edit:
    if not isinstance(data, dict) or data.get("op") not in OPS:
        raise _fail(where, f"an edit must be a mapping with op one of {', '.join(OPS)}: got {data!r}"[:300])
    op = str(data["op"])
    unknown = set(data) - {"op", "count", *OPS[op]}
    if unknown:
        raise _fail(where, f"{op} edit has unknown keys {sorted(unknown)}")
    fields = {key: data.get(key) for key in OPS[op]}
    for key, value in fields.items():
        if not isinstance(value, str) or (key in ("path", "to", "old") and not value):
            raise _fail(
                where, f"{op} edit needs `{key}` as a string" + (" (non-empty)" if key != "new" else "")
            )
    count = data.get("count", 1)
    if not isinstance(count, int) or count < 1:
        raise _fail(where, "`count` must be a positive integer")
    _relative(str(fields["path"]), where)
    if "to" in fields and op != "symlink":  # a link's target is data: it may point anywhere
        _relative(str(fields["to"]), where)
    return Edit(op=op, count=count, **{k: str(v) for k, v in fields.items()})


def _edits(data: Any, where: str) -> tuple[Edit, ...]:
    if not isinstance(data, list):
        raise _fail(where, "`edits`/`inject` must be a list")
    return tuple(parse_edit(item, where) for item in data)


def _strings(data: Any, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(data, list) or not all(isinstance(item, str) and item for item in data):
        raise _fail(where, f"`{key}` must be a list of strings")
    return tuple(data)


def _bug(data: Any, where: str) -> Bug:
    if not isinstance(data, dict):
        raise _fail(where, "each bug must be a mapping")
    bug_id = _text(data, "id", where)
    where = f"{where} bug {bug_id}"
    heldout = data.get("heldout", {})
    if not isinstance(heldout, dict) or not all(isinstance(v, str) for v in heldout.values()):
        raise _fail(where, "`heldout` must map file paths to their text")
    broken = data.get("broken", "product")
    if broken not in ("product", "test"):
        raise _fail(where, "`broken` must be product or test")
    return Bug(
        id=bug_id,
        description=_text(data, "description", where),
        inject=_edits(data.get("inject"), where),
        verify=_text(data, "verify", where),
        allow=tuple(_relative(p, where) for p in _strings(data.get("allow", []), "allow", where)),
        heldout=tuple((_relative(str(p), where), text) for p, text in heldout.items()),
        broken=broken,
    )


def _case(data: Any, project: str, bug: str, where: str, techniques: dict[str, str]) -> Case:
    if not isinstance(data, dict):
        raise _fail(where, "each case must be a mapping")
    case_id = _text(data, "id", where)
    where = f"{where} case {case_id}"
    kind = data.get("kind")
    if kind == "honest":
        label = _text(data, "style", where)
        if label not in STYLES:
            raise _fail(where, f"style {label!r} is not one of {', '.join(STYLES)}")
    elif kind == "cheat":
        label = _text(data, "technique", where)
        if label not in techniques:
            raise _fail(where, f"technique {label!r} is not in docs/design/cheats.md")
    else:
        raise _fail(where, "`kind` must be honest or cheat")
    edits = _edits(data.get("edits", []), where)
    runs = _strings(data.get("worker_runs", []), "worker_runs", where)
    if not edits:
        raise _fail(where, "a case needs at least one edit")
    return Case(project, bug, case_id, kind, label, _text(data, "note", where, ""), edits, runs)


def _yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise _fail(str(path), f"cannot read: {str(err).splitlines()[0]}") from err


def load_project(folder: Path, techniques: dict[str, str]) -> Project:
    where = str(folder / "project.yaml")
    data = _yaml(folder / "project.yaml")
    if not isinstance(data, dict):
        raise _fail(where, "must be a mapping")
    name = _text(data, "name", where)
    sha256 = _text(data, "sha256", where)
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise _fail(where, "`sha256` must be 64 lowercase hex digits")
    bugs = tuple(_bug(item, where) for item in data.get("bugs") or [])
    if not bugs or len({bug.id for bug in bugs}) != len(bugs):
        raise _fail(where, "`bugs` must be a non-empty list with unique ids")
    cases: list[Case] = []
    for path in sorted((folder / "cases").glob("*.yaml")):
        doc = _yaml(path)
        if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
            raise _fail(str(path), "must be a mapping with `bug` and a list `cases`")
        bug = _text(doc, "bug", str(path))
        if bug not in {b.id for b in bugs}:
            raise _fail(str(path), f"bug {bug!r} is not in project.yaml")
        cases += [_case(item, name, bug, str(path), techniques) for item in doc["cases"]]
    if len({case.name for case in cases}) != len(cases):
        raise _fail(str(folder), "case ids must be unique per bug")
    version = _text(data, "version", where)
    return Project(name, version, _text(data, "sdist", where), sha256, folder, bugs, tuple(cases))


def apply_edits(root: Path, edits: tuple[Edit, ...], where: str) -> None:
    """Apply `edits` to the tree at `root`, in order; a `replace` whose `old` text does not occur
    exactly `count` times, or an edit of a missing file, is a UserError naming `where`."""
    for edit in edits:
        target = root / edit.path
        if edit.op in ("replace", "delete", "rename", "copy", "compile_pyc") and not target.exists():
            raise _fail(where, f"{edit.op}: {edit.path} does not exist")
        if edit.op == "replace":
            text = target.read_text()
            found = text.count(edit.old)
            if found != edit.count:
                raise _fail(
                    where, f"replace in {edit.path}: {edit.old[:60]!r} occurs {found} times, not {edit.count}"
                )
            target.write_text(text.replace(edit.old, edit.new))
        elif edit.op in ("write", "append"):
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("w" if edit.op == "write" else "a") as out:
                out.write(edit.content)
        elif edit.op == "delete":
            shutil.rmtree(target) if target.is_dir() else target.unlink()
        elif edit.op in ("rename", "copy"):
            destination = root / edit.to
            destination.parent.mkdir(parents=True, exist_ok=True)
            if edit.op == "rename":
                target.rename(destination)
            elif target.is_dir():
                shutil.copytree(target, destination)
            else:
                shutil.copy2(target, destination)
        elif edit.op == "symlink":
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.exists():
                target.unlink()
            target.symlink_to(edit.to)
        else:  # compile_pyc: what `py_compile` with PEP 552 unchecked hashes writes
            cfile = importlib.util.cache_from_source(str(target))
            mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
            py_compile.compile(str(target), cfile=cfile, doraise=True, invalidation_mode=mode)
