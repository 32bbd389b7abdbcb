"""`mp-engine doctor`: what an operator gets wrong, checked before it bites.

Every check returns one `Check` (ok / warn / fail, what was found, and the fix). A check
never raises and never changes anything; `mp-engine doctor` exits 1 if any check fails.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mp_engine.config import Config, load_config
from mp_engine.errors import ConfigError, StateError, WorkspaceError
from mp_engine.exitcodes import ExitCode
from mp_engine.gitcmd import TIMED_OUT, GitResult, git
from mp_engine.pids import pid_alive
from mp_engine.sync.signatures import signers_path
from mp_engine.workspace import Workspace

OK, WARN, FAIL = "ok", "warn", "fail"
NETWORK_FS = ("nfs", "nfs4", "cifs", "smb", "smb3", "smbfs", "fuse.sshfs", "9p", "afs", "ceph", "glusterfs")
MIN_FREE = 100 * 1024 * 1024  # below this a result or a state write may fail
LOW_FREE = 1024 * 1024 * 1024
REMOTE_TIMEOUT = 20.0


@dataclass(frozen=True)
class Check:
    name: str
    level: str  # ok, warn, fail
    message: str
    fix: str = ""

    def line(self) -> str:
        tag = {OK: "ok  ", WARN: "warn", FAIL: "FAIL"}[self.level]
        return f"[{tag}] {self.name}: {self.message}" + (f" -- fix: {self.fix}" if self.fix else "")


def run_checks(root: Path) -> list[Check]:
    """All checks for the workspace at `root`; later checks are skipped when it is unusable."""
    ws = Workspace.at(root)
    try:
        ws.check()
    except WorkspaceError as e:
        return [Check("workspace", FAIL, str(e), f"mp-engine init {ws.root}")]
    checks = [_workspace(ws)]
    try:
        config = load_config(ws.root)
    except ConfigError as e:
        return [*checks, Check("config", FAIL, str(e).replace("\n", " "), f"edit {ws.config_file}")]
    checks.append(Check("config", OK, f"{ws.config_file.name} is valid"))
    steps: list[Callable[[Workspace, Config], Check]] = [
        _state,
        _stale_run,
        _git_identity,
        _remote,
        _branch,
        _signatures,
        _inotify,
        _network_fs,
        _agent_chain,
        _disk,
    ]
    for step in steps:
        try:
            checks.append(step(ws, config))
        except Exception as e:  # a broken check is reported, the others still run
            checks.append(Check(step.__name__.strip("_"), FAIL, f"the check itself failed: {type(e).__name__}: {e}"))
    return checks


def _workspace(ws: Workspace) -> Check:
    """Every directory the engine writes must be writable; a world-writable inbox lets any
    local user run commands with the engine's rights."""
    not_writable = [
        ws.rel(p) or "." for p in (ws.root, ws.inbox_dir, ws.system_dir, ws.runs_dir) if p.exists() and not _writable(p)
    ]
    if not_writable:
        return Check(
            "workspace",
            FAIL,
            f"{ws.root}: not writable by this user: {', '.join(not_writable)}",
            f"run as the workspace's owner, or `chown -R {os.getuid()} {ws.root}`",
        )
    mode = os.stat(ws.inbox_dir).st_mode
    if mode & stat.S_IWOTH:
        return Check(
            "workspace",
            WARN,
            f"{ws.rel(ws.inbox_dir)} is world-writable: any local user can run commands as the engine",
            f"chmod o-w {ws.inbox_dir}",
        )
    return Check("workspace", OK, f"{ws.root}: layout complete and writable")


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK | os.X_OK)


def _state(ws: Workspace, config: Config) -> Check:
    from mp_engine.record.events import EventLog
    from mp_engine.record.state import StateStore

    try:
        state = StateStore(ws.state_file, EventLog(ws.events_file)).read()
    except StateError as e:
        return Check(
            "state", FAIL, str(e), f"restore {ws.state_file.name} from git, or re-create it with `mp-engine init`"
        )
    halted = f", halted on {state.halt.mp_id}" if state.halt else ""
    return Check("state", OK, f"{ws.state_file.name} is valid (status {state.status.value}{halted})")


def _stale_run(ws: Workspace, config: Config) -> Check:
    """A lock owner or a RUNNING state whose process is gone (a crash, a kill -9)."""
    from mp_engine.lock import WorkspaceLock

    owner = WorkspaceLock(ws.lock_file, 1).owner()
    here = socket.gethostname()
    if owner and owner.get("host") == here and not pid_alive(owner.get("pid")):
        return Check(
            "lock",
            WARN,
            f"the lock owner record names pid {owner.get('pid')} ({owner.get('purpose')}), which is gone",
            "harmless (the kernel freed the lock); the next engine start replaces the record",
        )
    try:
        state = json.loads(ws.state_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Check("lock", OK, "no lock held")
    daemon = state.get("daemon") or {}
    if state.get("status") == "RUNNING" and daemon.get("host") == here and not pid_alive(daemon.get("pid")):
        return Check(
            "lock",
            WARN,
            f"stale RUNNING state: engine pid {daemon.get('pid')} is gone with run {state.get('run_id')} open",
            "start the engine (`mp-engine run` or the service); it resumes the run from its ledger",
        )
    if owner:
        return Check("lock", OK, f"held by pid {owner.get('pid')} on {owner.get('host')} for {owner.get('purpose')}")
    return Check("lock", OK, "no stale lock or RUNNING state")


def _git(ws: Workspace, *args: str, timeout: float = 10.0) -> GitResult:
    return git(ws.root, *args, check=False, timeout=timeout)


def _is_repo(ws: Workspace) -> bool:
    return (ws.root / ".git").exists()


def _git_identity(ws: Workspace, config: Config) -> Check:
    if not config.git.enabled:
        return Check("git identity", OK, "[git] is off; no commits are made")
    if shutil.which("git") is None:
        return Check("git identity", FAIL, "git is not on PATH", "install git")
    name = _git(ws, "config", "user.name").out.strip()
    email = _git(ws, "config", "user.email").out.strip()
    if not name or not email:
        return Check(
            "git identity",
            WARN,
            "no git user.name/user.email: results are committed as mp-engine <mp-engine@localhost>",
            f'git -C {ws.root} config user.name "mp-engine on {socket.gethostname()}" && '
            f"git -C {ws.root} config user.email you@example.org",
        )
    return Check("git identity", OK, f"commits as {name} <{email}>")


def _remote(ws: Workspace, config: Config) -> Check:
    if not config.git.enabled:
        return Check("git remote", OK, "[git] is off")
    if not _is_repo(ws):
        return Check("git remote", FAIL, f"{ws.root} is not a git repository", "mp-engine init --remote URL DIR")
    timeout = min(config.git.timeout, REMOTE_TIMEOUT)
    proc = _git(ws, "ls-remote", "--heads", config.git.remote, config.git.branch, timeout=timeout)
    if proc.code == TIMED_OUT:
        return Check(
            "git remote",
            FAIL,
            f"`git ls-remote {config.git.remote}` did not answer within {timeout:g} s",
            "check the network and the remote URL (`git remote -v`)",
        )
    if proc.code != 0:
        err = " ".join(proc.err.split())[:300]
        return Check(
            "git remote",
            FAIL,
            f"`git ls-remote {config.git.remote}` failed (exit {proc.code}): {err}",
            "check the URL and that this user's ssh key or credential works without a prompt "
            f"(`GIT_TERMINAL_PROMPT=0 git -C {ws.root} ls-remote {config.git.remote}`)",
        )
    return Check("git remote", OK, f"{config.git.remote} answers without a prompt")


def _branch(ws: Workspace, config: Config) -> Check:
    if not config.git.enabled:
        return Check("git branch", OK, "[git] is off")
    branch = config.git.branch
    head = _git(ws, "symbolic-ref", "--short", "-q", "HEAD").out.strip()
    if head != branch:
        return Check(
            "git branch",
            FAIL,
            f"the workspace is on {head or 'a detached HEAD'}, not {branch}",
            f"git -C {ws.root} checkout {branch}",
        )
    remote = _git(ws, "ls-remote", "--heads", config.git.remote, branch, timeout=min(config.git.timeout, REMOTE_TIMEOUT))
    if remote.code == TIMED_OUT:
        return Check("git branch", WARN, f"on {branch} locally; the remote did not answer")
    if remote.code == 0 and not remote.out.strip():
        return Check(
            "git branch",
            WARN,
            f"{config.git.remote} has no branch {branch} yet",
            f"git -C {ws.root} push -u {config.git.remote} {branch}",
        )
    return Check("git branch", OK, f"on {branch}" + (", which the remote has" if remote.code == 0 else ""))


def _signatures(ws: Workspace, config: Config) -> Check:
    g = config.git
    if not g.require_signed:
        if g.allowed_signers or g.allowed_gpg_keys:
            return Check(
                "signatures",
                WARN,
                "allowed signers are configured but git.require_signed is false: unsigned MPs still run",
                "set git.require_signed = true",
            )
        return Check("signatures", OK, "not required (git.require_signed = false)")
    if not g.allowed_signers and not g.allowed_gpg_keys:
        return Check(
            "signatures",
            FAIL,
            "git.require_signed is true but no allowed signer is configured",
            "set git.allowed_signers to an ssh allowed-signers file outside the workspace",
        )
    if g.allowed_signers:
        path = signers_path(ws.root, g)  # the engine's own rule
        assert path is not None
        if path == ws.root or ws.root in path.parents:
            return Check(
                "signatures",
                FAIL,
                f"git.allowed_signers = {path} is inside the workspace: a push could add its own key",
                "move it outside the repository, e.g. /etc/mp-engine/allowed_signers",
            )
        if not path.is_file():
            return Check(
                "signatures",
                FAIL,
                f"git.allowed_signers = {path} does not exist",
                "create it: one `principal key` per line",
            )
        if not any(line.strip() and not line.startswith("#") for line in path.read_text(errors="replace").splitlines()):
            return Check("signatures", FAIL, f"{path} lists no key", "add one `principal key` line per allowed signer")
        if path.stat().st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return Check("signatures", WARN, f"{path} is writable by others", f"chmod go-w {path}")
    return Check("signatures", OK, "signed MPs required; the allowed-signers file is outside the workspace")


def _inotify(ws: Workspace, config: Config) -> Check:
    limit_file = Path("/proc/sys/fs/inotify/max_user_watches")
    if config.watch.mode == "polling":
        return Check("inotify", OK, "[watch] mode = polling: inotify is not used")
    if not limit_file.exists():
        return Check("inotify", OK, "no inotify on this system (the native observer uses the platform's own)")
    limit = int(limit_file.read_text().strip())
    dirs = _count_dirs(ws.root)
    # The engine watches one directory (Claude_Inbox/, not recursive); the limit is shared by
    # every program of this user, and editors or build watchers on the workspace need one per directory.
    if limit < max(8192, dirs):
        return Check(
            "inotify",
            WARN,
            f"fs.inotify.max_user_watches = {limit}, and the workspace alone has {dirs} directories; "
            "when it runs out the engine falls back to polling",
            "echo fs.inotify.max_user_watches=524288 | sudo tee /etc/sysctl.d/60-inotify.conf && sudo sysctl --system",
        )
    return Check(
        "inotify", OK, f"max_user_watches = {limit} (the workspace has {dirs} directories; the engine watches 1)"
    )


def _count_dirs(root: Path, cap: int = 200_000) -> int:
    count = 0
    for _dirpath, dirnames, _files in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        count += 1
        if count >= cap:
            break
    return count


def mount_type(path: Path, mounts: Path = Path("/proc/mounts")) -> str | None:
    """The file-system type of the mount holding `path` (longest mount-point prefix)."""
    try:
        lines = mounts.read_text().splitlines()
    except OSError:
        return None
    best, fstype = "", None
    target = str(path)
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        if (target == point or target.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, fstype = point, parts[2]
    return fstype


def _network_fs(ws: Workspace, config: Config) -> Check:
    fstype = mount_type(ws.root)
    if fstype is None:
        return Check("filesystem", OK, "file-system type unknown here (no /proc/mounts)")
    network = fstype in NETWORK_FS or fstype.startswith(("nfs", "fuse.sshfs", "smb"))
    if network and config.watch.mode != "polling":
        return Check(
            "filesystem",
            WARN,
            f"the workspace is on {fstype}: inotify does not see writes made by other machines",
            'set [watch] mode = "polling" in mp-engine.toml',
        )
    return Check("filesystem", OK, f"{fstype}" + (" with polling" if network else " (local)"))


def _agent_chain(ws: Workspace, config: Config) -> Check:
    levels = [lv for lv in config.agent.levels if not lv.hard_gate]
    if not levels:
        return Check("agent chain", OK, "no agent levels configured (agent MPs end in NEED_INFO)")
    missing = [f"{lv.name}: {lv.argv[0]}" for lv in levels if shutil.which(lv.argv[0]) is None]
    if missing:
        return Check(
            "agent chain",
            FAIL,
            f"not found on PATH: {', '.join(missing)}",
            "install them, or give absolute paths in [[agent.levels]] argv (the service's PATH is set in its unit)",
        )
    return Check("agent chain", OK, f"{len(levels)} level(s) found on PATH: {', '.join(lv.argv[0] for lv in levels)}")


def _disk(ws: Workspace, config: Config) -> Check:
    usage = shutil.disk_usage(ws.root)
    free = usage.free
    human = f"{free / 1024**3:.1f} GiB free of {usage.total / 1024**3:.1f} GiB"
    if free < MIN_FREE:
        return Check("disk", FAIL, human, f"free space on the file system of {ws.root} (old runs: SYSTEM/runs/)")
    if free < LOW_FREE or free < usage.total * 0.05:
        return Check("disk", WARN, human, f"free space soon; old runs are in {ws.rel(ws.runs_dir)}/")
    return Check("disk", OK, human)


def doctor(root: Path, echo: Callable[[str], None], style: Callable[[str, str], str] | None = None) -> ExitCode:
    """Print one line per check (coloured by `style(line, colour)` on a terminal); exit 1
    when a check failed."""
    checks = run_checks(root)
    colours = {OK: "green", WARN: "yellow", FAIL: "red"}
    for c in checks:
        line = c.line()
        echo(style(line, colours[c.level]) if style and c.level != OK else line)
    failed = sum(c.level == FAIL for c in checks)
    warned = sum(c.level == WARN for c in checks)
    echo(f"{len(checks)} checks: {failed} failed, {warned} warnings")
    return ExitCode.MP_ERROR if failed else ExitCode.OK
