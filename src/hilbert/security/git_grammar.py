"""A `git` command line read as git reads it, for the command policy (`hilbert.security.policy`).

`read_git(arguments, environment, cwd)` takes the words after `git` and the `NAME=value` words the
shell put before it, and returns a `GitCommand`: the verb, the verb's own arguments, the folder git
will be in (`-C`), the paths git is pointed at (repository, work tree, exec path, `GIT_DIR=` ...) and
the configuration keys set for this one command (`-c`, `--config-env`, `GIT_CONFIG_KEY_<n>`,
`GIT_CONFIG_PARAMETERS`). It decides nothing; the policy does.

The grammar is git's own (`git.c`'s `handle_options`): global options come before the verb;
`-C DIR`, `-c KEY[=VALUE]` and `--shallow-file FILE` take the next word; `--git-dir`, `--work-tree`,
`--namespace`, `--super-prefix`, `--config-env` and `--attr-source` take `=VALUE` or the next word;
`--exec-path` and `--list-cmds` take only `=VALUE`; `-h`/`--help` and `-v`/`--version` are the verbs
`help` and `version`. Each `-C` is a `chdir`, relative to the previous one (`-C ""` stays put), and
every relative path after it — a later option's, an environment variable's, the verb's — resolves
against where the `-C`s led. A word starting with `-` that git would not know is kept in `unknown`
(git refuses to run it; the policy refuses it too, since a newer git might read it as taking a value
and the verb would be the word after).

Configuration keys are `ConfigKey(section, subsection, name)` as git compares them: section and
variable name case-insensitive (lowered here), the subsection (`includeIf.<subsection>.path`) kept as
written, since git compares it case-sensitively.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

PATH_OPTIONS = frozenset({"--git-dir", "--work-tree", "--exec-path", "--shallow-file"})
NEXT_WORD_ONLY = frozenset({"-C", "-c", "--shallow-file"})
# `=VALUE` or the next word (`--attr-source` since git 2.40)
VALUE_OPTIONS = frozenset(
    {"--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env", "--attr-source"}
)
EQUALS_ONLY = frozenset({"--exec-path", "--list-cmds"})
FLAGS = frozenset(
    {
        "-p",
        "--paginate",
        "-P",
        "--no-pager",
        "--no-replace-objects",
        "--bare",
        "--literal-pathspecs",
        "--glob-pathspecs",
        "--noglob-pathspecs",
        "--icase-pathspecs",
        "--no-optional-locks",
        "--no-lazy-fetch",
        "--no-advice",
        "--html-path",
        "--man-path",
        "--info-path",
    }
)
VERB_OPTIONS = {"-h": "help", "--help": "help", "-v": "version", "--version": "version"}
# Environment variables naming a path git reads or writes (a `:` list for the alternates).
PATH_VARIABLES = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_COMMON_DIR",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_CONFIG",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_EXEC_PATH",
        "GIT_TEMPLATE_DIR",
    }
)


@dataclass(frozen=True)
class ConfigKey:
    """`section[.subsection].name`, compared as git compares it."""

    section: str
    subsection: str | None
    name: str

    @classmethod
    def parse(cls, key: str) -> ConfigKey:
        section, _, rest = key.partition(".")
        subsection, dot, name = rest.rpartition(".")
        return cls(section.lower(), subsection if dot else None, name.lower())

    def matches(self, pattern: str) -> bool:
        """Whether this key is `pattern`, written `section.name`, `section.*.name` (any subsection) or
        `section.*` (any key of the section)."""
        want = pattern.split(".")
        if want[0].lower() != self.section:
            return False
        if len(want) == 2:
            return want[1] == "*" or (self.subsection is None and want[1].lower() == self.name)
        subsection, name = want[1], want[2]
        return (
            self.subsection is not None
            and (subsection == "*" or subsection == self.subsection)
            and name.lower() == self.name
        )

    def __str__(self) -> str:
        middle = f".{self.subsection}" if self.subsection is not None else ""
        return f"{self.section}{middle}.{self.name}"


@dataclass(frozen=True)
class GitCommand:
    """What `git ...` will do, as far as its words say: `verb` ("" when there is none),
    `arguments` (the words after the verb), `cwd` (after every `-C`), `paths` (each `(where, path)`
    a global option or variable points git at, relative ones resolved against `cwd`), `config`
    (keys set for this command), `unknown` (global options git would not know)."""

    verb: str
    arguments: tuple[str, ...]
    cwd: Path
    paths: tuple[tuple[str, Path], ...]
    config: tuple[ConfigKey, ...]
    unknown: tuple[str, ...]


def read_git(arguments: list[str], environment: dict[str, str], cwd: Path) -> GitCommand:
    """Read `git ARGUMENTS` run with `ENVIRONMENT` (the `NAME=value` words before it) in `cwd`."""
    named: list[tuple[str, str]] = []  # (option, value), in order
    config: list[ConfigKey] = []
    unknown: list[str] = []
    verb, rest = "", list[str]()
    words = list(arguments)
    while words:
        word = words.pop(0)
        option, equals, value = word.partition("=")
        if word in VERB_OPTIONS:
            verb, rest = VERB_OPTIONS[word], words
            break
        if not word.startswith("-"):
            verb, rest = word, words
            break
        if word in FLAGS or word == "--exec-path":
            continue
        if equals and option in VALUE_OPTIONS | EQUALS_ONLY:
            named.append((option, value))
        elif word in NEXT_WORD_ONLY | VALUE_OPTIONS:
            named.append((word, words.pop(0) if words else ""))
        else:
            unknown.append(word)
    here = cwd
    paths: list[tuple[str, Path]] = []
    for option, value in named:
        if option == "-C":
            here = here / Path(value).expanduser() if value else here
        elif option == "-c":
            config.append(ConfigKey.parse(value.partition("=")[0]))
        elif option == "--config-env":
            config.append(ConfigKey.parse(value.rpartition("=")[0] or value))
    if here != cwd:
        paths.append(("-C", here))
    for option, value in named:
        if option in PATH_OPTIONS and value:
            paths.append((option, here / Path(value).expanduser()))
    for variable, value in environment.items():
        if variable in PATH_VARIABLES:
            for part in filter(None, value.split(":")):
                paths.append((variable, here / Path(part).expanduser()))
        elif variable.startswith("GIT_CONFIG_KEY_"):
            config.append(ConfigKey.parse(value))
        elif variable == "GIT_CONFIG_PARAMETERS":
            config.extend(ConfigKey.parse(item.partition("=")[0]) for item in _split(value))
    return GitCommand(verb, tuple(rest), here, tuple(paths), tuple(config), tuple(unknown))


def _split(value: str) -> list[str]:
    try:
        return shlex.split(value)
    except ValueError:
        return [value]


__all__ = ["ConfigKey", "GitCommand", "read_git"]
