"""Doctor's checks of the git channel: identity, remote, branch, signatures."""

from __future__ import annotations

import shutil
import socket
import stat

from mp_engine.commands.doctor.check import FAIL, OK, WARN, Check
from mp_engine.config.load import Config
from mp_engine.core.errors import ConfigError
from mp_engine.core.gitcmd import TIMED_OUT, GitResult, config_problem, git, protect_config
from mp_engine.core.workspace import GIT_CONFIG_COPY, Workspace
from mp_engine.sync.push import refusal_notice
from mp_engine.sync.signatures import signers_path
from mp_engine.sync.store import SyncStore

REMOTE_TIMEOUT = 20.0


def _git(ws: Workspace, *args: str, timeout: float = 10.0) -> GitResult:
    return git(ws.root, *args, check=False, timeout=timeout)


def _is_repo(ws: Workspace) -> bool:
    return (ws.root / ".git").exists()


def identity(ws: Workspace, config: Config) -> Check:
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
            # --global: the engine refuses a .git/config it did not write itself (config_guard)
            f'git config --global user.name "mp-engine on {socket.gethostname()}" && '
            "git config --global user.email you@example.org",
        )
    return Check("git identity", OK, f"commits as {name} <{email}>")


def remote(ws: Workspace, config: Config) -> Check:
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


def branch(ws: Workspace, config: Config) -> Check:
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
    remote = _git(
        ws, "ls-remote", "--heads", config.git.remote, branch, timeout=min(config.git.timeout, REMOTE_TIMEOUT)
    )
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


def pushes(ws: Workspace, config: Config) -> Check:
    """A push the remote refused for good (sync/push.py) is a failure the operator must see."""
    if not config.git.enabled:
        return Check("git push", OK, "[git] is off")
    blocked = SyncStore(ws.local_dir / "gitsync.json").blocked()
    notice = refusal_notice(blocked)
    if notice is not None:
        return Check(
            "git push",
            FAIL,
            f"{notice}; results are committed on this host and not pushed",
            "make the remote accept the push (its message says why), or drop the refused commits with "
            f"`git -C {ws.root} reset --soft {config.git.remote}/{config.git.branch}`; then restart the engine",
        )
    if blocked:
        return Check("git push", WARN, f"the channel is blocked: {blocked.get('kind')}", "see `mp-engine status`")
    return Check("git push", OK, "no push refused")


def signatures(ws: Workspace, config: Config) -> Check:
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
    if g.platform_signers:
        from mp_engine.sync.platform import platform_signers  # lazy: gpg runs only when configured

        try:
            platform_signers(ws.root, g)
        except ConfigError as e:
            return Check("signatures", FAIL, str(e), 'docs/GIT.md, "MPs written through GitHub\'s API"')
    if not g.allowed_signers and not g.allowed_gpg_keys and not g.platform_signers:
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


def config_guard(ws: Workspace, config: Config) -> Check:
    """A .git/config the engine did not write (a step's `git config`, `git remote set-url`)
    stops the engine's git (gitcmd.protect_config; issue #20)."""
    if not config.git.enabled or not _is_repo(ws):
        return Check("git config", OK, "[git] is off")
    copy = ws.local_dir / GIT_CONFIG_COPY
    if not copy.exists():
        return Check("git config", OK, "not recorded yet: the engine accepts .git/config as it is at its next start")
    protect_config(ws.root, copy)
    problem = config_problem(ws.root)
    if problem is None:
        return Check("git config", OK, ".git/config is the one the engine accepted")
    what, _, fix = problem.partition(" The engine runs no git")
    return Check(
        "git config",
        FAIL,
        f"{what} The engine runs no git in this repository until it is resolved",
        fix.split(". ", 1)[-1],
    )
