"""`mp-engine init --remote URL`: clone or attach, lay out the workspace, enable `[git]`,
and commit and push the layout (the push may fail; `run` pushes it later)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import mp_engine.sync.push as push
from mp_engine.config.load import load_config
from mp_engine.core.atomic import atomic_write
from mp_engine.core.errors import SyncError
from mp_engine.core.gitcmd import git
from mp_engine.core.workspace import CONFIG_FILE, STATE_FILE, SYSTEM_DIR, init_workspace
from mp_engine.sync.context import SyncContext
from mp_engine.sync.pull import SyncOutcome
from mp_engine.sync.session import GitSession

GIT_SECTION_RE = re.compile(r"^\[git\][ \t]*$", re.M)


def setup_remote(directory: Path, url: str, branch: str) -> list[str]:
    """Returns what was done, for the CLI to print."""
    # Relative to where the user typed them: git runs inside DIRECTORY below, where a
    # relative DIRECTORY or remote path means something else (issue #44: DIR/DIR/.git).
    directory = Path(directory).absolute()
    url = local_path_absolute(url)
    done = connect_workspace(directory, url, branch)
    ws, created = init_workspace(directory)
    done += [f"created {p}" for p in created]
    enable_git_config(ws.config_file, "origin", branch)
    done.append(f"enabled [git] in {ws.rel(ws.config_file)} (remote origin, branch {branch})")
    layout = [p for p in (STATE_FILE, CONFIG_FILE, f"{SYSTEM_DIR}/.gitignore", ".gitignore") if (ws.root / p).exists()]
    layout += [ws.rel(ws.inbox_dir / ".gitkeep"), ws.rel(ws.runs_dir / ".gitkeep")]
    cfg = load_config(ws.root).git
    s = GitSession(ws.root, cfg.timeout)
    try:
        s.run("add", "--", *layout)
        if s.status("diff", "--cached", "--quiet")[0] != 0:
            s.run(*s.identity(), "commit", "--quiet", "--no-verify", "-m", "mp-engine: workspace layout", "--", *layout)
            done.append("committed the workspace layout")
        try:
            push.push(SyncContext(ws, cfg), s, SyncOutcome(), "")
            done.append(f"pushed {branch} to {url}")
        except SyncError as e:
            done.append(f"not pushed yet ({e}); `mp-engine run` pushes it when the remote is reachable")
    finally:
        s.close()
    return done


def connect_workspace(directory: Path, url: str, branch: str, timeout: float = 120.0) -> list[str]:
    """Clone into an empty directory, or attach an existing one to `url` as origin."""
    done: list[str] = []
    directory.mkdir(parents=True, exist_ok=True)
    if not any(directory.iterdir()):
        git(directory, "clone", "--quiet", "--origin", "origin", url, str(directory), timeout=timeout)
        done.append(f"cloned {url}")
        current = git(directory, "symbolic-ref", "--short", "-q", "HEAD", check=False).out.strip()
        has_head = git(directory, "rev-parse", "-q", "--verify", "HEAD", check=False).ok
        if not has_head or current != branch:
            if not git(directory, "checkout", "-q", branch, check=False).ok:
                git(directory, "checkout", "-q", "-b", branch)
        return done
    if not (directory / ".git").exists():
        git(directory, "init", "--quiet", "-b", branch)
        done.append("created a git repository")
    origin = git(directory, "remote", "get-url", "origin", check=False)
    if not origin.ok:
        git(directory, "remote", "add", "origin", url)
        done.append(f"added remote origin {url}")
    elif origin.out.strip() != url:
        raise SyncError(
            f"{directory} already has remote origin = {origin.out.strip()}. "
            f"Run `git -C {directory} remote set-url origin {url}` if it should point at {url}."
        )
    return done


def local_path_absolute(url: str) -> str:
    """A remote given as a relative path of this host (`../channel.git`) made absolute;
    URLs (`file://`, `https://`, `git@host:path`) as they are."""
    if "://" in url or os.path.isabs(url) or (":" in url.split("/", 1)[0] and not Path(url).exists()):
        return url
    return os.path.abspath(url)


def enable_git_config(config_file: Path, remote: str, branch: str) -> None:
    """Set `[git] enabled = true`, `remote` and `branch` in mp-engine.toml, keeping the rest."""
    text = config_file.read_text(encoding="utf-8") if config_file.exists() else ""
    values = {"enabled": "true", "remote": _toml_str(remote), "branch": _toml_str(branch)}
    m = GIT_SECTION_RE.search(text)
    if m is None:
        body = "".join(f"{k} = {v}\n" for k, v in values.items())
        text = text.rstrip("\n") + ("\n\n" if text.strip() else "") + f"[git]\n{body}"
    else:
        start = m.end()
        nxt = re.search(r"^\[", text[start:], re.M)
        end = start + nxt.start() if nxt else len(text)
        section = text[start:end]
        for key, val in values.items():
            pat = re.compile(rf"^{key}[ \t]*=.*$", re.M)
            if pat.search(section):
                section = pat.sub(f"{key} = {val}", section, count=1)
            else:
                section = f"\n{key} = {val}" + section
        text = text[:start] + section + text[end:]
    atomic_write(config_file, text)


def _toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
