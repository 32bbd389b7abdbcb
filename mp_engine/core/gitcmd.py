"""The one git runner: every git process mp-engine starts goes through `git()`.

Shaped after pre-commit's `cmd_output`: a non-interactive environment, a timeout that
kills the child, and a failure (`GitFailed`) that carries the command, the exit code,
stdout and stderr. The channel (sync/), the agent's evidence, `doctor` and `send` use it.

It lives beside `atomic.py` rather than in `sync/`: the agent loop and the commands run
git too, and `agent/` must not import `sync/` (pyproject.toml, import-linter contracts).
"""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import AnyStr, Generic, Literal, overload

from mp_engine.core.errors import GitConfigChanged, RemoteUnreachable, SyncError

UNREACHABLE_RE = re.compile(
    r"Could not read from remote|does not appear to be a git repository|Connection refused|unable to access|"
    r"Could not resolve host|timed out|Timeout|unable to connect|Connection reset|No route to host|"
    r"Network is unreachable|repository .* not found|Permission denied|Host key verification failed",
    re.I,
)
DEFAULT_TIMEOUT = 120.0
# Settings a step could plant in the repository's .git/config to make the engine's own git
# run its code with the daemon's environment: hooks (post-commit, reference-transaction,
# pre-push run even with --no-verify) and the fsmonitor hook. The engine never needs
# either, so every git call overrides them (issue #20). core.sshCommand is overridden by
# GIT_SSH_COMMAND below.
SAFE_CONFIG = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")
TIMED_OUT = 124  # the exit code a timed-out git call reports (as timeout(1) does)
# For commits on the agent's clock (work branches, task commits, picks): no check for
# something to pack. `gc.auto=0` stops `git gc --auto`; since git 2.29 a commit also starts
# `git maintenance run --auto`, a process of its own after every commit, unless
# `maintenance.auto` is off. The channel's own commits (sync/) keep both: they pack the
# workspace's repository over the months.
NO_AUTO_GC = ("-c", "gc.auto=0", "-c", "maintenance.auto=false")


def ssh_control_dir() -> str | None:
    """A private directory for ssh's shared connections (`/tmp/mpe-ssh-<uid>`, mode 0700,
    ours, not a link), or None when it cannot be had. Short on purpose: a unix socket path
    is limited to about 100 bytes, and ssh's `%C` adds 40."""
    path = os.path.join(tempfile.gettempdir(), f"mpe-ssh-{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return path


def noninteractive_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Variables that make every git call fail fast instead of asking for a credential.

    ssh connections are shared (`ControlMaster=auto`, kept 60 s after the last use): an
    engine's poll, fetch and two pushes then pay one ssh handshake instead of four (bench
    figure 10). A `GIT_SSH_COMMAND` that sets its own ControlMaster or ControlPath is left
    as it is."""
    environ = dict(os.environ) if environ is None else environ
    ssh = environ.get("GIT_SSH_COMMAND") or "ssh"
    share = ""
    if "ControlMaster" not in ssh and "ControlPath" not in ssh and (control := ssh_control_dir()):
        share = f" -o ControlMaster=auto -o ControlPath={control}/%C -o ControlPersist=60"
    return {
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "",  # empty: git skips core.askPass and SSH_ASKPASS too
        "SSH_ASKPASS_REQUIRE": "never",
        "GCM_INTERACTIVE": "never",
        "GIT_SSH_COMMAND": f"{ssh} -o BatchMode=yes -o ConnectTimeout=15{share}",
        "GIT_LITERAL_PATHSPECS": "1",
        "GIT_EDITOR": "true",
        "LC_ALL": "C",
    }


@dataclass(frozen=True)
class GitResult(Generic[AnyStr]):
    """What one git process did: its stdout decoded (`GitResult[str]`), or its bytes
    (`GitResult[bytes]`, `git(..., text=False)`)."""

    args: tuple[str, ...]
    code: int
    out: AnyStr
    err: str

    @property
    def ok(self) -> bool:
        return self.code == 0


class GitFailed(SyncError):
    """`git ARGS` exited non-zero (or timed out); carries the evidence."""

    def __init__(self, result: GitResult[str] | GitResult[bytes], message: str | None = None):
        self.result = result
        super().__init__(message or describe_failure(result))


def describe_failure(r: GitResult[str] | GitResult[bytes]) -> str:
    out = r.out if isinstance(r.out, str) else r.out.decode("utf-8", errors="replace")
    return f"`git {' '.join(r.args)}` failed (exit {r.code}): {(r.err or out).strip()}"


# Repositories whose .git/config the engine guards: root -> (the copy it accepted, the
# config file: `.git/config`, or a bare mirror's `config`) (`protect_config`). A step runs
# with the engine's rights and can edit the config; the keys that make git run code or
# send traffic elsewhere are many (filter and diff drivers, gpg.program, credential.helper,
# url.*.insteadOf, remote URLs, include.path, ...) and an operator may set some of them on
# purpose. So no key is overridden: any change the engine did not make stops every engine
# git call under that root (issue #20).
_GUARDED: dict[Path, tuple[Path, Path]] = {}


def protect_config(root: Path, accepted: Path, config: Path | None = None) -> str | None:
    """Guard `root`'s git config (`config`, default `root/.git/config`) from now on in this
    process: every git call whose cwd is under `root` first compares it with the copy at
    `accepted`. The first time (no copy yet) the config as it is now is accepted. Returns
    the change already there, if any (see `config_change`)."""
    root = Path(os.path.realpath(root))
    _GUARDED[root] = (Path(accepted), Path(config) if config is not None else root / ".git" / "config")
    if not Path(accepted).exists():
        accept_config(root)
    return config_change(root)


def accept_config(root: Path) -> None:
    """The engine changed the config itself (`remote add`): this is the accepted one now."""
    root = Path(os.path.realpath(root))
    if root not in _GUARDED:
        return
    accepted, config = _GUARDED[root]
    try:
        data = config.read_bytes()
    except OSError:
        return
    from mp_engine.core.atomic import atomic_write

    accepted.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(accepted, data, durable=False)


def config_change(root: Path) -> str | None:
    """How `root`'s git config differs from the accepted copy (the lines removed and
    added, at most 12), or None when it does not, or when `root` is not guarded."""
    root = Path(os.path.realpath(root))
    if root not in _GUARDED:
        return None
    accepted, config = _GUARDED[root]
    try:
        now = config.read_bytes()
    except OSError:
        now = b""
    try:
        before = accepted.read_bytes()
    except OSError:
        return None
    if now == before:
        return None
    old = set(before.decode("utf-8", "replace").splitlines())
    new = set(now.decode("utf-8", "replace").splitlines())
    lines = [f"-{ln.strip()}" for ln in sorted(old - new)] + [f"+{ln.strip()}" for ln in sorted(new - old)]
    return "; ".join(lines[:12]) + (f"; ... {len(lines) - 12} more" if len(lines) > 12 else "") or "(reordered)"


def config_problem(root: Path) -> str | None:
    """What to tell a person when `root`'s git config is not the accepted one, or None."""
    root = Path(os.path.realpath(root))
    change = config_change(root)
    if change is None:
        return None
    copy, config = _GUARDED[root]
    return (
        f"{config} changed, and not by the engine: {change}. The engine runs no git in this "
        "repository until it is resolved, since a step can make git run code through its config. If you made "
        f"the change, accept it: delete {copy} and restart the engine; otherwise restore the accepted copy: "
        f"`cp {copy} {config}`."
    )


def _guard(cwd: str | os.PathLike[str]) -> None:
    if not _GUARDED:
        return
    here = Path(os.path.abspath(cwd))
    for root in _GUARDED:
        if (here == root or root in here.parents) and (problem := config_problem(root)):
            raise GitConfigChanged(problem)


@overload
def git(
    cwd: str | os.PathLike[str],
    *args: str,
    check: bool = True,
    timeout: float | None = DEFAULT_TIMEOUT,
    input: str | bytes | None = None,
    text: Literal[True] = True,
    env: dict[str, str] | None = None,
) -> GitResult[str]: ...


@overload
def git(
    cwd: str | os.PathLike[str],
    *args: str,
    check: bool = True,
    timeout: float | None = DEFAULT_TIMEOUT,
    input: str | bytes | None = None,
    text: Literal[False],
    env: dict[str, str] | None = None,
) -> GitResult[bytes]: ...


def git(
    cwd: str | os.PathLike[str],
    *args: str,
    check: bool = True,
    timeout: float | None = DEFAULT_TIMEOUT,
    input: str | bytes | None = None,
    text: bool = True,
    env: dict[str, str] | None = None,
) -> GitResult[str] | GitResult[bytes]:
    """Run `git ARGS` in `cwd`. With `check`, a non-zero exit raises `GitFailed`, or
    `RemoteUnreachable` when git could not reach the remote (the engine keeps its commits
    and retries). A timeout kills git and counts as exit 124. `env`: extra variables.
    In a guarded repository (`protect_config`), a changed .git/config raises
    `GitConfigChanged` before git starts."""
    _guard(cwd)
    env = {**os.environ, **noninteractive_env(), **(env or {})}
    result: GitResult[str] | GitResult[bytes]
    try:
        # Its own process group: on a timeout the whole group is killed, ssh or a credential
        # helper included, which would otherwise keep the pipes open and the call hanging.
        proc = subprocess.Popen(
            ["git", *SAFE_CONFIG, *args],
            cwd=cwd,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except OSError as e:  # git itself is missing, or cwd vanished
        message = f"could not start git in {cwd}: {e.strerror or e}"
        result = GitResult(tuple(args), 127, "", message) if text else GitResult(tuple(args), 127, b"", message)
    else:
        data = input.encode() if isinstance(input, str) else input
        try:
            out, err = proc.communicate(data, timeout=timeout)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            code, err = TIMED_OUT, f"timed out after {timeout:g} s (git.timeout)".encode()
        decoded = err.decode("utf-8", errors="replace")
        if text:
            result = GitResult(tuple(args), code, out.decode("utf-8", errors="replace"), decoded)
        else:
            result = GitResult(tuple(args), code, out, decoded)
    if check and not result.ok:
        raise failure(result)
    return result


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def failure(r: GitResult[str] | GitResult[bytes]) -> SyncError:
    """The error for a failed git call: `RemoteUnreachable` when the remote could not be
    reached (results stay committed locally), `GitFailed` otherwise."""
    if UNREACHABLE_RE.search(r.err):
        return RemoteUnreachable(
            f"`git {' '.join(r.args)}` could not reach the remote (exit {r.code}): {r.err.strip()}. "
            "Results stay committed locally and are pushed when it is back; check the URL and the network."
        )
    return GitFailed(r)
