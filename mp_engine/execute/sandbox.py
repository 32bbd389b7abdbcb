"""The agent sandbox (`[agent] sandbox = "os"`, docs/AGENT.md): every agent call and every
check of an agent MP runs under bubblewrap (Debian's `bubblewrap`, a maintained
namespace sandbox; not a hand-written jail), seeing:

- its worktree read-write, the CLI's own state directories read-write (each preset lists
  them), a private /tmp, and the rest of the filesystem read-only;
- nothing at all of the engine's workspace outside the worktree (`SYSTEM/.engine/`,
  `mp-engine.toml`, `SESSION_STATE.json`, other runs and worktrees), of `~/.ssh`,
  `~/.gnupg`, `~/.config/gh`, git credential stores, or of `[agent] sandbox_hide`: those
  become empty read-only directories (a file, an empty file);
- the repository's git directory read-only with its `config` emptied (a remote URL may hold
  a token), so git works in the worktree; writable are only the worktree's own git state and
  the object store (`git add`), never refs, config or hooks;
- no network but the hosts `sandbox_allow_hosts` lists and the endpoint each level is
  configured to use (agent/call/endpoints.py), reached through relay.py; the CLI
  configuration that endpoint was read from stays read-only (`protected`);
- the engine's own git identity (`git_identity`), since the repository's config is empty and
  a service user often has no global one (issue #44: aider then writes user.name into the
  read-only `.git/config` and crashes);
- a PID namespace of its own that dies with the call: it cannot signal the engine, and
  nothing it starts outlives it.

Nothing runs unsandboxed when the sandbox is asked for: `problem()` says why it cannot work
here, and the engine refuses to start with the fix.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mp_engine.config.agent import AgentConfig, AgentLevel
from mp_engine.core.errors import SandboxUnavailable
from mp_engine.core.gitcmd import git
from mp_engine.execute import relay_inside
from mp_engine.execute.relay import Heard, Relay

BWRAP = "bwrap"
# Credentials of the daemon user an agent has no business reading.
SECRET_PATHS = (
    "~/.ssh",
    "~/.gnupg",
    "~/.config/gh",
    "~/.git-credentials",
    "~/.config/git/credentials",
    "~/.netrc",
    "~/.aws",
    "~/.docker/config.json",
    "~/.config/mp-engine",
)
# What the engine commits with when git knows no identity (sync/session.py, agent/run/workbranch.py).
ENGINE_IDENTITY = ("mp-engine", "mp-engine@localhost")
FIX = (
    "install bubblewrap (`apt install bubblewrap`, `dnf install bubblewrap`) and allow unprivileged user "
    'namespaces (`sysctl kernel.unprivileged_userns_clone=1`; on Ubuntu 24.04 also an AppArmor profile for bwrap), or set `[agent] sandbox = "none"`'
)


def expand(path: str) -> Path:
    """`~` and `$VAR` expanded; a `$VAR` that is not set expands to nothing (then skipped)."""
    text = os.path.expandvars(os.path.expanduser(path))
    return Path(text) if "$" not in text and text else Path()


@dataclass(frozen=True)
class Sandbox:
    """What one sandboxed process may see and reach."""

    workdir: Path
    hide: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()  # besides the worktree: CLI state, the evidence directory
    readable: tuple[Path, ...] = ()  # inside a hidden directory, but needed (a check's script)
    allow_hosts: tuple[str, ...] = ()  # host:port the process may connect to
    installed: tuple[Path, ...] = ()  # what runs the call, where the private /tmp would hide it
    gitdirs: tuple[Path, Path] | None = field(default=None)  # (common dir, this worktree's)
    read_only: bool = False  # the worktree too (a `[diagnose]` call only reads)
    protected: tuple[Path, ...] = ()  # read-only even inside what is writable (the CLI's endpoint config)
    git_identity: tuple[str, str] = ENGINE_IDENTITY  # (user.name, user.email) git finds inside

    @classmethod
    def of(
        cls,
        workdir: Path,
        *,
        engine_root: Path,
        hide: Sequence[str] = (),
        writable: Sequence[str | Path] = (),
        readable: Sequence[Path] = (),
        allow_hosts: Sequence[str] = (),
        programs: Sequence[str] = (),
        read_only: bool = False,
        protected: Sequence[Path] = (),
    ) -> Sandbox:
        hidden = [engine_root, *(expand(p) for p in (*SECRET_PATHS, *hide))]
        return cls(
            workdir=workdir.resolve(),
            hide=tuple(dict.fromkeys(p.resolve() for p in hidden if str(p) not in ("", "."))),
            writable=tuple(dict.fromkeys(p.resolve() for p in map(_path, writable) if str(p) not in ("", "."))),
            readable=tuple(p.resolve() for p in (*readable, *_git_identity())),
            allow_hosts=tuple(dict.fromkeys(_host_port(h) for h in allow_hosts)),
            gitdirs=_gitdirs(workdir),
            installed=_installed(programs),
            read_only=read_only,
            protected=tuple(dict.fromkeys(p.resolve() for p in protected)),
            git_identity=engine_identity(workdir),
        )

    def argv(self, argv: Sequence[str], relay_dir: Path | None = None) -> list[str]:
        """`argv` run inside the sandbox. With allowed hosts, `relay_dir` holds the relay's
        sockets and hosts file (relay.py), bound in and served by its inside half."""
        out = [BWRAP, "--die-with-parent", "--new-session", "--unshare-all"]
        out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for p in self.installed:  # read-only, and before what is hidden: hiding wins inside them
            out += ["--ro-bind-try", str(p), str(p)]
        dirs = []
        for p in self.hide:
            if p.is_dir():
                dirs.append(p)
                out += ["--tmpfs", str(p)]
            elif p.exists():
                out += ["--ro-bind", str(empty_file()), str(p)]
        if self.gitdirs is not None:  # a worktree's git directories, where a private /tmp would hide them
            common, own = self.gitdirs
            out += ["--ro-bind", str(common), str(common), "--ro-bind", str(empty_file()), str(common / "config")]
            # The worktree's own git state, and the object store: `git add` (aider adds what it
            # creates) writes objects; refs, config and hooks stay read-only. A read-only call
            # (the reviewer reads `git log`) writes none of them.
            if not self.read_only:
                out += ["--bind", str(own), str(own), "--bind-try", str(common / "objects"), str(common / "objects")]
        for p in self.readable:
            out += ["--ro-bind-try", str(p), str(p)]
        out += ["--ro-bind-try" if self.read_only else "--bind-try", str(self.workdir), str(self.workdir)]
        for p in self.hide:  # hidden inside the worktree (the engine's own files): hidden again over it
            if p != self.workdir and p.is_relative_to(self.workdir) and p.exists():
                out += ["--tmpfs", str(p)] if p.is_dir() else ["--ro-bind", str(empty_file()), str(p)]
        for p in self.writable:
            out += ["--bind-try", str(p), str(p)]
        for p in self.protected:  # after the writable directories they lie in
            out += ["--ro-bind-try", str(p), str(p)]
        out += [x for d in dirs for x in ("--remount-ro", str(d))]  # hidden stays empty and unwritable
        # Config from the environment (git >= 2.31), above every file: the engine's identity.
        name, email = self.git_identity
        out += ["--setenv", "GIT_CONFIG_COUNT", "2", "--setenv", "GIT_CONFIG_KEY_0", "user.name"]
        out += ["--setenv", "GIT_CONFIG_VALUE_0", name, "--setenv", "GIT_CONFIG_KEY_1", "user.email"]
        out += ["--setenv", "GIT_CONFIG_VALUE_1", email]
        if self.allow_hosts and relay_dir is not None:
            out += ["--bind", str(relay_dir), str(relay_dir), "--ro-bind", str(relay_dir / "hosts"), "/etc/hosts"]
            out += ["--ro-bind", str(relay_dir / "resolv.conf"), "/etc/resolv.conf"]
            out += ["--chdir", str(self.workdir), "--", sys.executable, "-I", "-S", relay_inside.__file__]
            out += [str(relay_dir), "--", *argv]
            return out
        return [*out, "--chdir", str(self.workdir), "--", *argv]

    def record(self) -> dict[str, Any]:
        """The rules, as the evidence and the result record them."""
        return {
            "mechanism": "bubblewrap",
            "worktree": str(self.workdir),
            "writable": [str(p) for p in self.writable],
            "hidden": [str(p) for p in self.hide],
            "network": list(self.allow_hosts) or "none",
            "read_only": [str(p) for p in self.protected],
            "git_identity": f"{self.git_identity[0]} <{self.git_identity[1]}>",
            "pid_namespace": True,
            **({"read_only": True} if self.read_only else {}),  # the worktree too ([diagnose], the reviewer)
        }


def for_call(
    cfg: AgentConfig,
    level: AgentLevel,
    *,
    workdir: Path,
    engine_root: Path,
    evidence_dir: Path,
    readable: Sequence[Path],
    read_only: bool = False,
    endpoints: Sequence[str] = (),
    protected: Sequence[Path] = (),
) -> Sandbox | None:
    """The sandbox of one agent call of `level`, or None when its calls run unsandboxed.
    `read_only`: always sandboxed, the worktree read-only too (a `[diagnose]` call).
    `endpoints`: the hosts the level is configured to reach, allowed with its own; `protected`:
    the files that said so (agent/call/endpoints.py), read-only inside."""
    if not (cfg.sandboxed(level) or read_only):
        return None
    return Sandbox.of(
        workdir,
        engine_root=engine_root,
        hide=cfg.sandbox_hide,
        writable=[*level.sandbox_rw, evidence_dir],
        readable=readable,
        allow_hosts=[*cfg.sandbox_allow_hosts, *level.sandbox_allow_hosts, *endpoints],
        programs=level.argv[:1],
        read_only=read_only,
        protected=protected,
    )


def for_checks(cfg: AgentConfig, *, workdir: Path, engine_root: Path, steps_dir: Path) -> Sandbox | None:
    """The sandbox of an agent MP's checks (their scripts and output records are in
    `steps_dir`), or None."""
    if not cfg.sandboxed():
        return None
    return Sandbox.of(
        workdir,
        engine_root=engine_root,
        hide=cfg.sandbox_hide,
        writable=[steps_dir],
        allow_hosts=cfg.sandbox_allow_hosts,
    )


def summary(cfg: AgentConfig) -> dict[str, Any] | None:
    """What ran sandboxed in an agent MP, for its result (None: nothing did)."""
    if not cfg.wants_sandbox():
        return None
    levels = {lv.name: cfg.sandboxed(lv) for lv in cfg.all_levels() if not lv.hard_gate}
    boxed = [name for name, on in levels.items() if on]
    hosts = {
        lv.name: [*cfg.sandbox_allow_hosts, *lv.sandbox_allow_hosts] for lv in cfg.all_levels() if lv.name in boxed
    }
    what = [f"the agent calls of {', '.join(boxed)}"] if boxed else []
    what += ["every check"] if cfg.sandboxed() else []
    said = (
        f"{' and '.join(what).capitalize()} ran in the sandbox (bubblewrap): the worktree writable, the engine's "
        "workspace and the user's credentials hidden, a PID namespace of their own; network: "
        + ("; ".join(f"{n} to {', '.join(h)}" for n, h in hosts.items() if h) or "none")
        + (", and the endpoint each level is configured to use" if boxed else "")
        + ". Each call's rules are in its evidence (`sandbox.json`, with the endpoints and where they were set)."
    )
    return {"mechanism": "bubblewrap", "levels": levels, "checks": cfg.sandboxed(), "allow_hosts": hosts, "said": said}


@contextlib.contextmanager
def confined(sandbox: Sandbox | None, argv: Sequence[str], on_connect: Heard | None = None) -> Iterator[list[str]]:
    """`argv` as it runs: unchanged without a sandbox; inside it otherwise, with the relay to
    its allowed hosts open for as long as the process runs. `on_connect(host, error)`: each
    connection to an allowed host, `error` None when it was joined, else why it could not
    be made (refused, no such name, unreachable)."""
    if sandbox is None:
        yield list(argv)
    elif not sandbox.allow_hosts:
        yield sandbox.argv(argv)
    else:
        with Relay(sandbox.allow_hosts, on_connect) as relay:
            yield sandbox.argv(argv, relay.dir)


def _path(p: str | Path) -> Path:
    return p if isinstance(p, Path) else expand(p)


def _installed(programs: Sequence[str]) -> tuple[Path, ...]:
    """The engine's own Python and source tree, and each program's installation (two levels
    above its executable, as found on PATH and as its links resolve), where they lie under
    /tmp, which the sandbox makes private: a checkout, a virtualenv or a CLI installed there
    must still run inside."""
    roots = {Path(sys.prefix), Path(sys.base_prefix), Path(__file__).resolve().parents[2]}
    for program in programs:
        found = shutil.which(program)
        if found:
            roots |= {Path(found).parent.parent, Path(found).resolve().parent.parent}
    tmp = Path("/tmp").resolve()
    return tuple(sorted({r.resolve() for r in roots if tmp in r.resolve().parents}))


def _git_identity() -> list[Path]:
    """The user's git configuration, read-only, where the sandbox would otherwise make it
    private (a HOME under /tmp): git and aider need user.name inside, and aider writes it into
    the repository's config, which the sandbox keeps read-only, when it finds none."""
    paths = [Path("~/.gitconfig").expanduser(), Path("~/.config/git/config").expanduser()]
    if os.environ.get("GIT_CONFIG_GLOBAL"):
        paths.append(Path(os.environ["GIT_CONFIG_GLOBAL"]))
    return [p for p in paths if p.is_file()]


def engine_identity(workdir: Path) -> tuple[str, str]:
    """(user.name, user.email) as the engine commits in `workdir` (the repository's, the
    user's, else mp-engine's own): what git and aider find in the sandbox, where the
    repository's config is empty."""
    found = {"user.name": ENGINE_IDENTITY[0], "user.email": ENGINE_IDENTITY[1]}
    cwd = workdir if workdir.is_dir() else Path.home()
    got = git(cwd, "config", "--get-regexp", r"^user\.(name|email)$", check=False, timeout=10)
    for line in got.out.splitlines() if got.code == 0 else []:
        key, _, value = line.partition(" ")
        if value.strip():
            found[key] = value.strip()
    return found["user.name"], found["user.email"]


def _host_port(text: str) -> str:
    host, _, port = text.strip().rpartition(":")
    if not host or not port.isdigit():
        return f"{text.strip()}:443"
    return f"{host}:{port}"


def _gitdirs(workdir: Path) -> tuple[Path, Path] | None:
    """A git worktree's (common git directory, its own git directory), when `workdir` is one."""
    dotgit = workdir / ".git"
    if not dotgit.is_file():
        return None
    text = dotgit.read_text(encoding="utf-8", errors="replace").strip()
    if not text.startswith("gitdir:"):
        return None
    own = (workdir / text.removeprefix("gitdir:").strip()).resolve()
    common_file = own / "commondir"
    common = (own / common_file.read_text().strip()).resolve() if common_file.exists() else own.parent.parent
    return common, own


def empty_file() -> Path:
    """An empty, read-only regular file of this process's, bound over files the sandbox hides
    (/dev/null would not do: a device on a nodev mount cannot be opened)."""
    path = _empty_file()
    if not path.exists():  # a temp cleaner took it
        _empty_file.cache_clear()
        path = _empty_file()
    return path


@functools.lru_cache(maxsize=1)
def _empty_file() -> Path:
    fd, name = tempfile.mkstemp(prefix="mp-engine-empty-")
    os.close(fd)
    os.chmod(name, 0o444)
    atexit.register(lambda: Path(name).unlink(missing_ok=True))
    return Path(name)


def require(cfg: AgentConfig) -> None:
    """SandboxUnavailable (exit 2, with the fix) when the configuration asks for the sandbox
    and it cannot work here: the engine and a fleet worker never run agents unsandboxed."""
    if cfg.wants_sandbox() and (why := problem()) is not None:
        raise SandboxUnavailable(f'[agent] sandbox = "os" cannot work on this host: {why}')


@functools.lru_cache(maxsize=1)
def problem() -> str | None:
    """Why the sandbox cannot work on this host (with the fix), or None: bubblewrap is run
    once, for real, with the namespaces the sandbox uses."""
    if shutil.which(BWRAP) is None:
        return f"bubblewrap (`bwrap`) is not installed: {FIX}"
    probe = [BWRAP, "--die-with-parent", "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    try:
        r = subprocess.run([*probe, "true"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap did not run ({e}): {FIX}"
    if r.returncode != 0:
        return f"bubblewrap cannot create its namespaces here ({r.stderr.strip() or r.returncode}): {FIX}"
    return None
