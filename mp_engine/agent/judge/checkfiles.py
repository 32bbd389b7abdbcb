"""The files an MP's checks run or collect (issue #42): what judges the work, so the agent
may not change it. Read from each Validate block's text against the files of the base
commit, by an ordered table of rules over one shell command (its words, shlex-split):

    ./check.sh, scripts/verify        a command that is a file of the repository
    python t.py, bash s.sh, node x    an interpreter's script
    source env.sh, . env.sh           a sourced file
    pytest [paths], python -m pytest  the test files it collects (test_*.py, *_test.py),
                                      every conftest.py above them, pytest's configuration
    go test [./pkg/...]               the *_test.go files of those packages
    jest, vitest, mocha, npm test     package.json, their configuration, *.test.* and *.spec.*
    cargo test                        tests/**/*.rs
    make [target]                     the Makefile

A check that only reads a file (`grep -q hello out/a.txt`) judges it, but that file is the
work, not the judge: it is not protected. Python checks protect the repository's scripts
their string literals name. What cannot be known (tests a runner finds by other rules,
inline Rust tests) is the operator's to name in `[agent] protected_paths`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mp_engine.inbox.mpfile import Block

INTERPRETERS = frozenset(
    {"python", "python3", "bash", "sh", "zsh", "node", "ruby", "perl", "php", "deno", "bun", "tsx", "ts-node", "bats"}
)
PYTEST_CONFIG = ("pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", ".pytest.ini")
JS_RUNNERS = frozenset({"jest", "vitest", "mocha", "ava", "tap"})
JS_CONFIG = re.compile(r"^(?:jest|vitest|vite|\.mocharc|babel|ava)\.config\.\w+$|^\.mocharc\.\w+$|^package\.json$")
SPLIT = re.compile(r"&&|\|\||[;|&\n()]")
PY_TEST = re.compile(r"(?:^|/)(?:test_[^/]*|[^/]*_test)\.py$|(?:^|/)conftest\.py$")
JS_TEST = re.compile(r"\.(?:test|spec)\.[cm]?[jt]sx?$|(?:^|/)__tests__/")


@dataclass(frozen=True)
class Command:
    """One simple command of a check, against the base's files (`files`) and directories."""

    words: tuple[str, ...]
    files: frozenset[str]
    dirs: frozenset[str]

    def path(self, word: str) -> str | None:
        """`word` as a repository path (`./a/b` -> `a/b`; a pytest node id's file), or None."""
        rel = word.split("::", 1)[0].removeprefix("./").rstrip("/")
        return rel if rel in self.files or rel in self.dirs else None

    def args(self, start: int = 1) -> list[str]:
        return [p for w in self.words[start:] if not w.startswith("-") and (p := self.path(w)) is not None]

    def under(self, roots: Iterable[str], test: re.Pattern[str]) -> set[str]:
        """The files matching `test` under `roots` (files or directories; "" the whole repository)."""
        out: set[str] = set()
        for r in roots:
            if r in self.files:
                out.add(r)
            else:
                out |= {f for f in self.files if (not r or f.startswith(r + "/")) and test.search(f)}
        return out


def _script(c: Command) -> set[str]:
    first = c.path(c.words[0])
    return {first} if first in c.files else set()


def _interpreted(c: Command) -> set[str]:
    if c.words[0].rsplit("/", 1)[-1] not in INTERPRETERS:
        return set()
    if len(c.words) > 2 and c.words[1] == "-m" and c.words[2] == "pytest":
        return _pytest(Command(("pytest", *c.words[3:]), c.files, c.dirs))
    script = next((w for w in c.words[1:] if not w.startswith("-")), None)
    found = c.path(script) if script is not None else None
    return {found} if found in c.files else set()


def _sourced(c: Command) -> set[str]:
    if c.words[0] in ("source", ".") and len(c.words) > 1 and (p := c.path(c.words[1])) in c.files:
        return {p} if p else set()
    return set()


def _pytest(c: Command) -> set[str]:
    if c.words[0].rsplit("/", 1)[-1] not in ("pytest", "py.test"):
        return set()
    tests = c.under(c.args() or [""], PY_TEST)
    above = {"/".join(t.split("/")[:i] + ["conftest.py"]) for t in tests for i in range(t.count("/") + 1)}
    config = {p for p in PYTEST_CONFIG if p in c.files}
    return tests | {p for p in above if p in c.files} | config


def _go(c: Command) -> set[str]:
    if c.words[:2] != ("go", "test"):
        return set()
    pkgs = [w.removeprefix("./").removesuffix("...").rstrip("/") for w in c.words[2:] if w.startswith(".")]
    return c.under(pkgs or [""], re.compile(r"_test\.go$"))


def _js(c: Command) -> set[str]:
    runner = c.words[0].rsplit("/", 1)[-1]
    npm = runner in ("npm", "yarn", "pnpm", "npx") and len(c.words) > 1
    if not (runner in JS_RUNNERS or (npm and (c.words[1] in ("test", "run", "t") or c.words[1] in JS_RUNNERS))):
        return set()
    config = {f for f in c.files if "/" not in f and JS_CONFIG.search(f)}
    return config | c.under(c.args(2 if npm else 1) or [""], JS_TEST)


def _cargo(c: Command) -> set[str]:
    return c.under(["tests"], re.compile(r"\.rs$")) if c.words[:2] == ("cargo", "test") else set()


def _make(c: Command) -> set[str]:
    if c.words[0] != "make":
        return set()
    return {m for m in ("Makefile", "makefile", "GNUmakefile") if m in c.files}


# Ordered; every rule that applies adds its files.
RULES: tuple[Callable[[Command], set[str]], ...] = (_script, _interpreted, _sourced, _pytest, _go, _js, _cargo, _make)


def commands(body: str) -> list[tuple[str, ...]]:
    """The simple commands of a shell check, each as its words (assignments dropped)."""
    out = []
    for part in SPLIT.split(body.replace("\\\n", " ")):
        try:
            words = shlex.split(part, comments=True)
        except ValueError:
            words = part.split()
        while words and re.match(r"^[A-Za-z_]\w*=", words[0]):  # FOO=1 pytest
            words = words[1:]
        while words and words[0] in (
            "exec",
            "time",
            "env",
            "sudo",
            "then",
            "do",
            "else",
            "!",
            "timeout",
            "uv",
            "poetry",
        ):
            words = words[2:] if words[0] == "timeout" else words[1:]
            if words and words[0] == "run":  # uv run, poetry run
                words = words[1:]
        if words:
            out.append(tuple(words))
    return out


def judged_by(checks: Iterable[Block], files: Iterable[str]) -> set[str]:
    """The base's files the checks run or collect."""
    listed = frozenset(files)
    dirs = frozenset(d for f in listed for d in _parents(f))
    out: set[str] = set()
    for block in checks:
        if block.lang == "py":
            named = re.findall(r"""["']([^"'\s]+\.(?:py|sh|js|ts))["']""", block.body)
            out |= {n.removeprefix("./") for n in named if n.removeprefix("./") in listed}
            continue
        for words in commands(block.body):
            c = Command(words, listed, dirs)
            for rule in RULES:
                out |= rule(c)
    return out


def _parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]
