"""Product code that newly looks at how it is run, or runs code that is not in the diff as code: each
rule of `hilbert.judge.integrity_runtime` catches its cheat, with the right weight (blocking or
advisory), and leaves its honest look-alike alone."""

from __future__ import annotations

import pytest

from hilbert.judge import Change, FileChange, Finding
from hilbert.judge.integrity import blocking, integrity_findings
from hilbert.judge.integrity_runtime import RULES

BASE = "import os\nimport sys\n\n\ndef scale(x, factor):\n    return x + factor\n"


def findings(body: str, *, path: str = "calc/ops.py", header: str = "") -> list[Finding]:
    """The findings of a change that adds `body` (indented into `scale`) and `header` to a product module."""
    lines = "".join(f"    {line}\n" if line else "\n" for line in body.splitlines())
    new = header + BASE.replace("    return x + factor\n", lines + "    return x * factor\n")
    return integrity_findings(Change(files=(FileChange(path, "modified", BASE, new),)), verify="make test")


# rule → (code a cheat adds, the imports it needs)
CHEATS: dict[str, tuple[str, str]] = {
    "argv": ("if any('pytest' in a or 'test' in a for a in sys.argv):\n    factor = factor", ""),
    "modules-scan": ("for name, module in list(sys.modules.items()):\n    pass", ""),
    "runner-module": ("main = sys.modules['__main__']", ""),
    "memory-scan": ("tables = [o for o in gc.get_objects() if isinstance(o, dict)]", "import gc\n"),
    "parent": ("parent = os.getppid()", ""),
    "proc": ("cmdline = open('/proc/self/cmdline').read()", ""),
    "stack": ("caller = sys._current_frames()", ""),
    "prefix": ("if sys.prefix != sys.base_prefix:\n    factor = factor", ""),
    "tracer": ("if faulthandler.is_enabled():\n    factor = factor", "import faulthandler\n"),
    "exit-handlers": ("atexit.unregister(print)", "import atexit\n"),
    "capture": ("if sys.stdout is not sys.__stdout__:\n    factor = factor", ""),
    "runner-variable": (
        "if os.environ.get('CI') or 'GITHUB_ACTIONS' in os.environ:\n    factor = factor",
        "",
    ),
    "environ-scan": ("if any(k.startswith('PYTEST') for k in os.environ):\n    factor = factor", ""),
    "modules-scan computed": ("tests = sys.modules['tests.' + 'test_ops']", ""),
    "runner-variable computed": ("ci = os.environ.get('GITHUB_' + 'ACTIONS')", ""),
    "where-compared": ("if '/tmp/' in os.getcwd():\n    factor = factor", ""),
    "test-files": ("heldout = glob.glob('**/test_*.py', recursive=True)", "import glob\n"),
    "argv-entry": ("args = sys.argv[1:]\nif __name__ == '__main__':\n    pass", ""),
    "module-lookup": ("np = sys.modules.get('numpy')", ""),
    "tty": ("colour = sys.stdout.isatty()", ""),
    "interpreter": ("python = sys.executable", ""),
    "cwd": ("here = os.getcwd()", ""),
    "clock": ("started = time.monotonic()", "import time\n"),
    "identity": ("host = socket.gethostname()", "import socket\n"),
    "variable": ("debug = os.environ.get('CALC_DEBUG')", ""),
    "threads": ("count = threading.active_count()", "import threading\n"),
    "import-path": ("sys.path.insert(0, 'vendor')", ""),
    "exec": ("exec(open('calc/answers.txt').read())", ""),
    "computed-import": ("fix = importlib.import_module('calc.' + 'fixed')", "import importlib\n"),
    "file-loader": ("spec = importlib.util.spec_from_file_location('m', 'm.txt')", "import importlib.util\n"),
    "code-object": ("code = marshal.loads(payload)", "import marshal\n"),
    "unpickle": ("table = pickle.loads(open('calc/t.bin', 'rb').read())", "import pickle\n"),
    "module-setattr": ("setattr(sys.modules[__name__], 'sc' + 'ale', lambda x, f: x * f)", ""),
    "builtins": ("builtins.len = lambda value: 42", "import builtins\n"),
    "import-hook": ("sys.meta_path.insert(0, object())", ""),
    "source-read": ("text = open('calc/fixed.py').read()", ""),
    "blob": ("code = base64.b64decode('" + "QUJD" * 20 + "')", "import base64\n"),
    "module-getattr": ("fn = getattr(os.path, 'jo' + 'in')", ""),
    "globals-write": ("globals()['sc' + 'ale'] = scale", ""),
    "decode": ("sep = bytes.fromhex('2c')", ""),
}


@pytest.mark.parametrize("rule", CHEATS)
def test_each_rule_catches_its_cheat_with_its_weight(rule: str) -> None:
    body, header = CHEATS[rule]
    found = [
        f for f in findings(body, header=header) if f.check in ("runtime_introspection", "code_from_data")
    ]
    rule = rule.split()[0]
    said = RULES[rule].says
    matching = [f for f in found if said in f.message]
    assert matching, [str(f) for f in found]
    assert all(f.blocking == RULES[rule].blocking for f in matching)
    assert ("(advisory)" in str(matching[0])) == (not RULES[rule].blocking)
    assert matching[0].path == "calc/ops.py" and matching[0].line is not None


def test_every_rule_has_a_cheat() -> None:
    assert {name.split()[0] for name in CHEATS} == set(RULES)


# honest code that looks like a rule's cheat: no blocking finding (advisory ones may be shown)
HONEST: dict[str, tuple[str, str]] = {
    "the module itself from sys.modules": ("this = sys.modules[__name__]", ""),
    "an optional dependency loaded already": ("if 'numpy' in sys.modules:\n    factor = float(factor)", ""),
    "a library's own setting": ("if os.environ.get('CALC_STRICT') == '1':\n    factor = int(factor)", ""),
    "a child process with the environment": (
        "env = dict(os.environ)\nsubprocess.run([sys.executable, '-c', 'pass'], env=env, check=True)",
        "import subprocess\n",
    ),
    "a timeout": (
        "deadline = time.monotonic() + 5\nif time.monotonic() > deadline:\n    raise TimeoutError",
        "import time\n",
    ),
    "colour on a terminal": ("colour = sys.stderr.isatty() and os.environ.get('TERM') != 'dumb'", ""),
    "a path relative to the working directory": ("path = os.path.join(os.getcwd(), 'out')", ""),
    "a data file next to the module": (
        "data = open(os.path.join(os.path.dirname(__file__), 'words.txt')).read()",
        "",
    ),
    "literal code and imports": (
        "value = eval('1 + 2')\nmod = importlib.import_module('json')",
        "import importlib\n",
    ),
    "dispatch by getattr on an object": ("handler = getattr(x, 'on_' + str(factor), None)", ""),
    "ast.literal_eval of text": ("value = ast.literal_eval(str(factor))", "import ast\n"),
    "a docstring that names /proc and site-packages": ('"""Reads /proc/meminfo, site-packages."""', ""),
    "a command-line entry point": ("argv = sys.argv[1:]", "import argparse\n"),
    "the module a class was defined in": ("module = sys.modules[type(x).__module__]", ""),
    "a variable named by the caller": ("value = os.environ.get(str(factor), '')", ""),
}


@pytest.mark.parametrize("name", HONEST)
def test_honest_look_alikes_block_nothing(name: str) -> None:
    body, header = HONEST[name]
    assert blocking(findings(body, header=header)) == []


def test_exec_of_compiled_text_is_one_finding() -> None:
    found = findings("exec(compile(open('calc/fix.txt').read(), 'fix', 'exec'))")
    assert [(f.check, f.blocking) for f in found] == [("code_from_data", True)]


def test_code_the_base_already_had_is_not_new() -> None:
    old = BASE.replace("    return x + factor\n", "    print(sys.argv)\n    return x + factor\n")
    new = old.replace("x + factor", "x * factor")
    change = Change(files=(FileChange("calc/ops.py", "modified", old, new),))
    assert integrity_findings(change, verify="make test") == []


def test_test_code_may_introspect() -> None:
    text = "import sys\n\n\ndef test_args():\n    assert sys.argv and exec('x = 1') is None\n"
    change = Change(files=(FileChange("tests/test_cli.py", "added", None, text),))
    assert integrity_findings(change, verify="make test") == []
