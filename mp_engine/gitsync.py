"""Sync: the workspace is a git working tree, and one branch of its remote is the channel.

The engine calls four points (issue #3, docs/GIT.md):
  - `poll()`     each loop cycle when due: `git ls-remote` (cheap); fetch, verify and
                 integrate only when the branch moved; push whatever is still unpushed;
  - `running()`  right after RUNNING is written: remember the worktree, commit, push;
  - `publish()`  when the MP ended: commit protocol files + what the MP changed, push;
  - `refusal_for()` before an MP is claimed: the signature verdict of the pull that
                 brought it.
Each call opens the `Repo`, runs git with a timeout and a non-interactive environment,
and closes it again, so a long-running daemon accumulates no `git` children or file
descriptors (GitPython's README: "leaks in long-running processes").
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from mp_engine.atomic import atomic_write
from mp_engine.config import CONFIG_FILE, GitConfig
from mp_engine.diagnosis import Diagnosis
from mp_engine.errors import ConfigError, InvalidMPError, RemoteUnreachable, SyncConflict, SyncError
from mp_engine.events import EventLog
from mp_engine.redact import redact_file
from mp_engine.signatures import INBOX_PATH, check_range
from mp_engine.workspace import (
    EVENTS_FILE,
    INBOX_FILE,
    LOCAL_DIR,
    RESULT_FILE,
    RUNS_DIR,
    STATE_FILE,
    SYSTEM_DIR,
    Workspace,
)

PROCESSED_REF = "refs/mp-engine/processed"
# What `GitSession.rev` reads from ref files itself: HEAD or a full ref name with no `..`
# (anything else goes to `git rev-parse`).
REF_NAME_RE = re.compile(r"HEAD|refs/(?!.*\.\.)[A-Za-z0-9._/-]+")
PATHS_ON_COMMAND_LINE = 16 * 1024  # bytes of paths passed as arguments (ARG_MAX is far above)
OBJECT_ID_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
BLOCKED_BRANCH = "mp-engine/blocked/{branch}"
RUNS_PREFIX = f"{SYSTEM_DIR}/{RUNS_DIR}/"
# The files the protocol owns; staged whenever they changed.
PROTOCOL_FILES = (STATE_FILE, f"{SYSTEM_DIR}/{RESULT_FILE}")
# The host's event log stays local: committed, it made every commit and push grow with it
# (to its 10 MiB rotation bound). Each run's events travel in `SYSTEM/runs/<run>/`.
EVENT_LOG = f"{SYSTEM_DIR}/{EVENTS_FILE}"
NEVER_STAGE = (".git/", f"{SYSTEM_DIR}/{LOCAL_DIR}/", CONFIG_FILE, EVENT_LOG)
UNREACHABLE_RE = re.compile(
    r"Could not read from remote|does not appear to be a git repository|Connection refused|unable to access|"
    r"Could not resolve host|timed out|Timeout|unable to connect|Connection reset|No route to host|"
    r"Network is unreachable|repository .* not found|Permission denied|Host key verification failed",
    re.I,
)


def noninteractive_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Variables that make every git call fail fast instead of asking for a credential."""
    environ = dict(os.environ) if environ is None else environ
    ssh = environ.get("GIT_SSH_COMMAND") or "ssh"
    return {
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "",  # empty: git skips core.askPass and SSH_ASKPASS too
        "SSH_ASKPASS_REQUIRE": "never",
        "GCM_INTERACTIVE": "never",
        "GIT_SSH_COMMAND": f"{ssh} -o BatchMode=yes -o ConnectTimeout=15",
        "GIT_LITERAL_PATHSPECS": "1",
        "GIT_EDITOR": "true",
        "LC_ALL": "C",
    }


class PushRejected(SyncError):
    """The push was refused because the remote has commits we do not (retried)."""


class GitSession:
    """One open `Repo` with the non-interactive environment (`GitSync.session()` keeps it)."""

    def __init__(self, root: Path, timeout: float):
        try:
            self.repo = git.Repo(root)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError) as e:
            raise SyncError(
                f"{root} is not a git working tree, but [git] enabled = true. "
                f"Run `mp-engine init --remote URL {root}` to connect it to a remote."
            ) from e
        self.repo.git.update_environment(**noninteractive_env())
        self.timeout = timeout
        self._git_dir = Path(self.repo.git_dir)
        self._common_dir = Path(self.repo.common_dir)
        # Loose and packed refs are files we can read; a reftable repository is not.
        self._files_backend = not (self._common_dir / "reftable").exists()
        self._packed: tuple[tuple[int, int, int], dict[str, str]] | None = None

    def close(self) -> None:
        self.repo.close()

    def run(self, *args: str, timeout: float | None = None) -> str:
        """stdout of `git ARGS`; `SyncError` with the command, exit code and stderr if it fails."""
        try:
            return self.repo.git.execute(["git", *args], kill_after_timeout=timeout or self.timeout)
        except git.GitCommandError as e:
            raise _command_error(e, args) from e

    def status(self, *args: str, timeout: float | None = None) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of `git ARGS`, never raising for a non-zero exit."""
        code, out, err = self.repo.git.execute(
            ["git", *args],
            with_exceptions=False,
            with_extended_output=True,
            kill_after_timeout=timeout or self.timeout,
        )
        return code, out, err

    def rev(self, name: str) -> str | None:
        """The commit `name` points at, or None. HEAD and full ref names are read from the
        ref files (loose, then packed-refs) without spawning git; anything else (a SHA, an
        expression, a reftable repository) asks `git rev-parse`.

        Not GitPython's `SymbolicReference.dereference_recursive`: it validates each path
        with `realpath` and re-reads packed-refs on every call, ~0.35 ms a ref, and the
        engine reads ~20 refs per MP."""
        if self._files_backend and REF_NAME_RE.fullmatch(name):
            for _depth in range(5):  # HEAD -> refs/heads/main -> a SHA; git allows 5 levels
                value = self._read_ref(name)
                if value is None:
                    return None
                if not value.startswith("ref: "):
                    return value if OBJECT_ID_RE.fullmatch(value) else None
                name = value[5:].strip()
                if not REF_NAME_RE.fullmatch(name):
                    break
            else:
                return None
        code, out, _ = self.status("rev-parse", "-q", "--verify", f"{name}^{{commit}}")
        return out.strip() if code == 0 and out.strip() else None

    def _read_ref(self, name: str) -> str | None:
        """The raw value of ref `name`: its loose file, else its packed-refs line."""
        try:  # HEAD is per worktree, refs/ are shared
            with open((self._git_dir if name == "HEAD" else self._common_dir) / name, encoding="utf-8") as f:
                return f.read().strip()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            pass
        return self._packed_refs().get(name)

    def _packed_refs(self) -> dict[str, str]:
        """packed-refs as {ref: sha}, re-read only when the file changed."""
        path = self._common_dir / "packed-refs"
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return {}
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if self._packed is None or self._packed[0] != key:
            refs: dict[str, str] = {}
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line[:1] in ("#", "^"):
                        continue
                    sha, _, ref = line.rstrip("\n").partition(" ")
                    refs[ref] = sha
            self._packed = (key, refs)
        return self._packed[1]

    def set_refs(self, refs: dict[str, str]) -> None:
        """Point the engine's bookkeeping refs (the processed marker, the remote-tracking
        branch) at commits, in-process: git's own lock-file protocol (`REF.lock` created
        exclusively, written, renamed over the loose ref, which shadows a packed one),
        so no git is spawned. Not fsynced: a stale value after a power loss is an older
        ancestor, which the rewrite check and the next push handle. A ref that a running
        git holds locked goes through `git update-ref`, which waits or reports it."""
        for ref, sha in refs.items():
            if not OBJECT_ID_RE.fullmatch(sha) or not REF_NAME_RE.fullmatch(ref) or ref == "HEAD":
                raise SyncError(f"refusing to set {ref!r} to {sha!r}: not a ref and an object id")
        if not self._files_backend:  # reftable: only git writes refs
            self.update_refs(refs)
            return
        slow: dict[str, str] = {}
        for ref, sha in refs.items():
            if self.rev(ref) == sha:  # e.g. the tracking ref, which `git push` already moved
                continue
            path = self._common_dir / ref
            lock = path.with_name(path.name + ".lock")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except OSError:
                slow[ref] = sha
                continue
            try:
                try:
                    os.write(fd, f"{sha}\n".encode())
                finally:
                    os.close(fd)
                os.replace(lock, path)
            except OSError:
                lock.unlink(missing_ok=True)
                slow[ref] = sha
        if slow:
            self.update_refs(slow)

    def index_mark(self) -> tuple[str, bytes] | None:
        """(HEAD, the index's trailing checksum), read without spawning git; None when
        unknown. Equal marks mean an index with the same content over the same commit, so
        a mark taken when nothing was staged proves nothing is staged now."""
        head = self.rev("HEAD")
        try:
            with open(Path(self.repo.git_dir) / "index", "rb") as f:
                f.seek(-32, os.SEEK_END)  # the SHA-1 (or SHA-256) over the index content
                tail = f.read(32)
        except OSError:
            return None
        if head is None or not tail.strip(b"\0"):  # index.skipHash writes a null checksum
            return None
        return head, tail

    def update_refs(self, refs: dict[str, str]) -> None:
        """Set several refs in one `git update-ref --stdin` transaction (one spawn)."""
        script = "".join(f"update {ref} {sha}\n" for ref, sha in refs.items())
        proc = subprocess.run(
            ["git", "update-ref", "--stdin"],
            cwd=self.repo.working_dir,
            input=script,
            text=True,
            capture_output=True,
            env={**os.environ, **noninteractive_env()},
            timeout=self.timeout,
        )
        if proc.returncode != 0:
            raise SyncError(f"`git update-ref --stdin` failed ({proc.returncode}): {proc.stderr.strip()}")

    def is_ancestor(self, a: str, b: str) -> bool:
        return self.status("merge-base", "--is-ancestor", a, b)[0] == 0

    def blob(self, commit: str, path: str) -> bytes | None:
        code, out, _ = self.status("cat-file", "-e", f"{commit}:{path}")
        if code != 0:
            return None
        return self.repo.git.execute(
            ["git", "cat-file", "blob", f"{commit}:{path}"],
            stdout_as_string=False,
            strip_newline_in_stdout=False,  # the exact bytes: a verdict is keyed by their SHA-256
            kill_after_timeout=self.timeout,
        )


def _command_error(e: git.GitCommandError, args: tuple[str, ...]) -> SyncError:
    return _failure(str(e.stderr or ""), e.status, args)


def _failure(stderr: str, status: object, args: tuple[str, ...]) -> SyncError:
    """The error for a failed `git ARGS`: `RemoteUnreachable` when the remote could not be
    reached (the engine keeps its commits and retries), `SyncError` otherwise."""
    stderr = stderr.strip().removeprefix("stderr: ").strip("'\n ")
    cmd = "git " + " ".join(args)
    if UNREACHABLE_RE.search(stderr):
        return RemoteUnreachable(
            f"`{cmd}` could not reach the remote (exit {status}): {stderr}. "
            "Results stay committed locally and are pushed when it is back; check the URL and the network."
        )
    return SyncError(f"`{cmd}` failed (exit {status}): {stderr}")


@dataclass
class SyncOutcome:
    """What a sync point did that the engine must act on."""

    integrated: bool = False  # new remote commits are now in the working tree
    problem: Diagnosis | None = None  # record an ERROR result with this diagnosis
    problem_mp: str | None = None


@dataclass
class Change:
    path: str
    code: str  # porcelain XY
    fingerprint: str


class GitSync:
    """The git layer of one workspace; see the module docstring."""

    def __init__(self, ws: Workspace, cfg: GitConfig, *, redact: Callable[[str], str] | None = None):
        self.ws = ws
        self.cfg = cfg
        self.redact = redact
        self.events = EventLog(ws.events_file, redact=redact)
        self.state_path = ws.local_dir / "gitsync.json"
        self.remote_name = cfg.remote
        self.tracking = f"refs/remotes/{cfg.remote}/{cfg.branch}"
        self._next_poll = 0.0
        self._unreachable: str | None = None
        # `GitSession.index_mark()` from when the engine last left the index with nothing
        # staged (its own commit, carried over its own fast-forwards); None: ask git.
        self._clean_index: tuple[str, bytes] | None = None
        self._session: GitSession | None = None
        self._remote_checked = False
        self.allowed_signers = self._check_signers_file()

    def bind(self, events: EventLog) -> None:
        """Share the engine's event log (one writer, one redactor)."""
        self.events = events

    # -- plumbing --------------------------------------------------------------------

    @contextmanager
    def session(self) -> Iterator[GitSession]:
        """The open repository, kept across sync points (opening one reads the config and
        resolves the git directory: ~0.3 ms, three times per MP). A session that saw an
        unexpected error is dropped and the next sync point opens a fresh one."""
        if self._session is None:
            self._session = GitSession(self.ws.root, self.cfg.timeout)
        try:
            yield self._session
        except BaseException as e:
            if not isinstance(e, SyncError):
                self.close()
            raise

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def _load(self) -> dict[str, Any]:
        import json

        try:
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            data = {}
        data.setdefault("baselines", {})
        data.setdefault("refusals", {})
        data.setdefault("blocked", None)
        return data

    def _save(self, data: dict[str, Any], *, durable: bool = True) -> None:
        """Write gitsync.json. Signature refusals and blocks are saved durably; attribution
        bookkeeping (baselines, the dirty set) with `durable=False`: it survives a `kill -9`,
        and after a power loss the file read back is an older one that still holds every
        refusal and block, while the MP's changes then stay local for the operator."""
        import json

        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        # Compact: json's C encoder does not run with `indent` (`jq . gitsync.json` to read it).
        text = json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False) + "\n"
        atomic_write(self.state_path, text, durable=durable)

    def _check_signers_file(self) -> str:
        if not self.cfg.require_signed:
            return ""
        if not self.cfg.allowed_signers and not self.cfg.allowed_gpg_keys:
            raise ConfigError(
                "git.require_signed is true but neither git.allowed_signers nor git.allowed_gpg_keys is set. "
                "Point git.allowed_signers at an ssh allowed-signers file outside the workspace."
            )
        if not self.cfg.allowed_signers:
            return os.devnull
        path = Path(os.path.realpath(Path(self.cfg.allowed_signers).expanduser()))
        if path == self.ws.root or self.ws.root in path.parents:
            raise ConfigError(
                f"git.allowed_signers = {path} lies inside the workspace, so anyone who can push could add "
                "their own key. Move it outside the repository (e.g. /etc/mp-engine/allowed_signers)."
            )
        if not path.is_file():
            raise ConfigError(f"git.allowed_signers = {path} does not exist. Create it (one `principal key` per line).")
        return str(path)

    # -- startup ---------------------------------------------------------------------

    def startup(self) -> None:
        """Check the repository, undo what a crash left half-done, and commit leftovers."""
        lock = self.ws.root / ".git" / "index.lock"
        if lock.exists() and not _held_open(lock):
            lock.unlink(missing_ok=True)
            self.events.emit("git_recovered", what="stale index.lock removed", path=".git/index.lock")
        with self.session() as s:
            top = Path(os.path.realpath(s.run("rev-parse", "--show-toplevel").strip()))
            if top != self.ws.root:
                raise SyncError(
                    f"the workspace {self.ws.root} is inside the git working tree {top}, not its top. "
                    f"Give the workspace its own repository: `mp-engine init --remote URL {self.ws.root}`."
                )
            gitdir = Path(s.run("rev-parse", "--absolute-git-dir").strip())
            if (gitdir / "rebase-merge").exists() or (gitdir / "rebase-apply").exists():
                s.status("rebase", "--abort")
                self.events.emit("git_recovered", what="half-finished rebase aborted")
            if (gitdir / "MERGE_HEAD").exists():
                s.status("merge", "--abort")
                self.events.emit("git_recovered", what="half-finished merge aborted")
            branch = s.status("symbolic-ref", "--short", "-q", "HEAD")[1].strip()
            if branch != self.cfg.branch:
                raise SyncError(
                    f"the workspace repository is on {branch or 'a detached HEAD'}, not on git.branch = "
                    f"{self.cfg.branch!r}. Run `git -C {self.ws.root} checkout {self.cfg.branch}`."
                )
            self._ensure_remote(s)
            self._untrack_event_log(s)
            if s.rev(PROCESSED_REF) is None and (tracking := s.rev(self.tracking)):
                s.set_refs({PROCESSED_REF: tracking})
            data = self._load()
            for run_id in list(data["baselines"]):
                ledger = self.ws.runs_dir / run_id / "ledger.json"
                if ledger.exists() and '"closed"' in ledger.read_text(encoding="utf-8"):
                    self._commit(s, f"{_mp_of(run_id)}: result committed after a restart", run_id, finished=True)
            changes = self._changes(s)
            leftovers = [p for p in changes if p in PROTOCOL_FILES[:2] or p.startswith(RUNS_PREFIX)]
            if leftovers and self._commit(s, "mp-engine: commit protocol files left by a restart", None, changes):
                self.events.emit("git_recovered", what="uncommitted protocol files committed")
            elif not leftovers:  # `_commit` records the dirty set; without a commit, do it here
                self._remember(self._load(), self._select(changes, None)[1])

    def _untrack_event_log(self, s: GitSession) -> None:
        """Workspaces made before 0.2 track SYSTEM/events.jsonl (the engine has moved the
        file to SYSTEM/.engine/): commit its removal, once. Left for the next start when
        the operator has something staged (a plain commit would take it too)."""
        if s.status("ls-files", "--error-unmatch", "--", EVENT_LOG)[0] != 0:
            return
        staged = [p for p in s.run("diff", "--cached", "--name-only", "-z").split("\0") if p]
        if staged:
            self.events.emit(
                "sync_failed",
                stage="untrack the old event log",
                error=f"left for the next start: other changes are staged ({', '.join(staged[:5])})",
            )
            return
        s.run("rm", "--cached", "--quiet", "--", EVENT_LOG)
        paths = [EVENT_LOG]
        ignore = self.ws.system_dir / ".gitignore"
        text = ignore.read_text(encoding="utf-8") if ignore.exists() else ""
        if f"/{EVENTS_FILE}" not in text.split():  # a stale copy a merge brings back stays out of status
            atomic_write(ignore, (text.rstrip("\n") + "\n" if text.strip() else "") + f"/{EVENTS_FILE}\n")
            s.run("--literal-pathspecs", "add", "--", f"{SYSTEM_DIR}/.gitignore")
            paths.append(f"{SYSTEM_DIR}/.gitignore")
        message = "mp-engine: the event log stays on the host; each run's events travel in its archive"
        code, out, err = s.status(*_identity(s), "commit", "--quiet", "--no-verify", "-m", message)
        if code != 0 and "nothing to commit" not in out + err:
            raise SyncError(f"`git commit` failed ({code}): {(err or out).strip()}")
        self.events.emit("git_recovered", what="old event log untracked", paths=paths)

    def _ensure_remote(self, s: GitSession) -> None:
        names = {r.name: r for r in s.repo.remotes}
        if self.cfg.remote in names:
            return
        if not re.search(r"[:/]", self.cfg.remote):
            raise SyncError(
                f"git.remote = {self.cfg.remote!r} is neither a remote of {self.ws.root} nor a URL. "
                f"Add it with `git -C {self.ws.root} remote add {self.cfg.remote} URL`."
            )
        url = self.cfg.remote
        if "origin" in names and names["origin"].url != url:
            raise SyncError(
                f"git.remote is the URL {url}, but remote `origin` points at {names['origin'].url}. "
                'Set git.remote = "origin" to use it, or change its URL with `git remote set-url origin URL`.'
            )
        if "origin" not in names:
            s.run("remote", "add", "origin", url)
        self.remote_name = "origin"
        self.tracking = f"refs/remotes/origin/{self.cfg.branch}"

    # -- polling ---------------------------------------------------------------------

    def next_poll_at(self) -> float:
        """Monotonic time at which the next poll is due."""
        return self._next_poll

    def due(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) >= self._next_poll

    def poll(self) -> SyncOutcome:
        """Pull when the branch moved, then push anything unpushed. Never raises SyncError."""
        self._next_poll = time.monotonic() + self.cfg.poll_interval
        out = SyncOutcome()
        with self.session() as s:
            self._resolve_remote(s)
            try:
                remote_sha = self._ls_remote(s)
                if remote_sha is not None:
                    out = self._integrate(s, remote_sha)
                if out.problem is None:
                    self._push(s, out)
            except RemoteUnreachable as e:
                self._remote_checked = False
                self._mark_unreachable(str(e))
            except SyncError as e:
                self._remote_checked = False
                self.events.emit("sync_failed", stage="poll", error=str(e))
        return out

    def _resolve_remote(self, s: GitSession) -> None:
        """Make sure the remote exists; checked again only after a poll failed (reading the
        remotes parses the git config, which the idle poll would otherwise do every time)."""
        if self._remote_checked:
            return
        if self.remote_name not in {r.name for r in s.repo.remotes}:
            self._ensure_remote(s)
        self._remote_checked = True

    def _ls_remote(self, s: GitSession) -> str | None:
        out = s.run("ls-remote", "--heads", self.remote_name, f"refs/heads/{self.cfg.branch}")
        self._mark_reachable()
        for line in out.splitlines():
            sha, _, ref = line.partition("\t")
            if ref == f"refs/heads/{self.cfg.branch}":
                return sha
        return None

    def _fetch(self, s: GitSession) -> tuple[str | None, bool]:
        """Fetch the branch into the tracking ref: (its new tip, whether the update was a
        fast-forward). Without `+` first, so git itself refuses a rewritten tip and a
        success proves the old tip is an ancestor of the new one; then forced."""
        spec = f"refs/heads/{self.cfg.branch}:{self.tracking}"
        if s.rev(self.tracking) is not None:
            if s.status("fetch", "--no-tags", "--quiet", self.remote_name, spec)[0] == 0:
                self._mark_reachable()
                return s.rev(self.tracking), True
        s.run("fetch", "--no-tags", "--quiet", self.remote_name, f"+{spec}")
        self._mark_reachable()
        return s.rev(self.tracking), False

    @property
    def unreachable(self) -> str | None:
        """Why the remote could not be reached at the last attempt, or None."""
        return self._unreachable

    def _mark_unreachable(self, why: str) -> None:
        if self._unreachable is None:
            self.events.emit("sync_unreachable", remote=self.remote_name, error=why)
        self._unreachable = why

    def _mark_reachable(self) -> None:
        if self._unreachable is not None:
            self._unreachable = None
            self.events.emit("sync_reachable", remote=self.remote_name)

    def _integrate(self, s: GitSession, remote_sha: str) -> SyncOutcome:
        """Bring `remote_sha` into the working tree: verify, then ff-only or rebase."""
        out = SyncOutcome()
        head = s.rev("HEAD")
        tracking = s.rev(self.tracking)
        if head is not None and (remote_sha == head or (tracking == remote_sha and s.is_ancestor(remote_sha, head))):
            return out
        data = self._load()
        blocked = data["blocked"]
        if blocked and blocked.get("remote") == remote_sha:
            return out  # already reported; wait until the remote moves again
        fast_forward = False
        if tracking != remote_sha:
            fetched, fast_forward = self._fetch(s)
            remote_sha = fetched or remote_sha
        if head is None:  # an unborn branch (fresh `git init`): adopt the remote as it is
            s.run("reset", "-q", remote_sha)
            s.set_refs({PROCESSED_REF: remote_sha})
            self.events.emit("sync_pulled", to=remote_sha[:12], how="adopted")
            return SyncOutcome(integrated=True)
        processed = s.rev(PROCESSED_REF)
        # A fast-forward fetch from the processed tip has already proved it an ancestor.
        proven = fast_forward and processed == tracking
        if processed and not proven and not s.is_ancestor(processed, remote_sha):
            return self._refuse_rewrite(s, data, processed, remote_sha)
        if self.cfg.require_signed:
            known = [head] + ([processed] if processed else [])
            verdict = check_range(s.run, remote_sha, known, self.allowed_signers, self.cfg.allowed_gpg_keys)
            if not verdict.ok:
                mp_bytes = s.blob(remote_sha, INBOX_PATH)
                self.events.emit(
                    "sync_refused", to=remote_sha[:12], reason=verdict.reason, mp_pending=mp_bytes is not None
                )
                if mp_bytes is not None:
                    data["refusals"][hashlib.sha256(mp_bytes).hexdigest()] = verdict.reason
                    self._save(data)
        # processed == head is the common case (nothing local since the last push), and then
        # the rewrite check above already proved head is an ancestor of the remote.
        if head == processed or s.is_ancestor(head, remote_sha):
            # Without --autostash first: the tree is rarely clean (the event log grows after
            # each commit), and autostash stashes every dirty file, which costs a full-index
            # `stash create` even when the incoming commits touch none of them. git refuses a
            # fast-forward that would overwrite a local change, and only then is stashing needed.
            clean = self._clean_index is not None and s.index_mark() == self._clean_index
            self._clean_index = None
            code, _out, err = s.status("merge", "--ff-only", "--quiet", remote_sha)
            if code != 0:
                if "would be overwritten" not in err and "untracked working tree files" not in err:
                    raise SyncError(f"`git merge --ff-only {remote_sha[:12]}` failed ({code}): {err.strip()}")
                s.run("merge", "--ff-only", "--autostash", "--quiet", remote_sha)
            elif clean:  # a fast-forward of a clean index leaves it clean
                self._clean_index = s.index_mark()
            how = "fast-forward"
        else:
            self._clean_index = None
            conflict = self._rebase(s, remote_sha)
            if conflict is not None:
                return self._block_on_conflict(s, data, remote_sha, conflict)
            how = "rebase"
        s.set_refs({PROCESSED_REF: remote_sha})
        if data["blocked"]:
            data["blocked"] = None
            self._save(data)
            self.events.emit("sync_unblocked", remote=remote_sha[:12])
        self.events.emit("sync_pulled", **{"from": head[:12], "to": remote_sha[:12], "how": how})
        out.integrated = True
        return out

    def _rebase(self, s: GitSession, onto: str) -> SyncConflict | None:
        """Rebase unpushed local commits onto `onto`; on conflict abort and return it."""
        code, _out, err = s.status("rebase", "--autostash", "--quiet", onto)
        if code == 0:
            return None
        paths = s.status("diff", "--name-only", "--diff-filter=U")[1].split()
        s.status("rebase", "--abort")
        dirty = s.status("status", "--porcelain", "--untracked-files=no")[1].strip()
        if dirty:  # the abort must leave the tree as it was; say so loudly if it did not
            self.events.emit("sync_failed", stage="rebase --abort", error=f"tree not clean after abort: {dirty}")
        return SyncConflict(err.strip(), paths or ["(git did not name them)"])

    def _block_on_conflict(self, s: GitSession, data: dict, remote_sha: str, c: SyncConflict) -> SyncOutcome:
        side = BLOCKED_BRANCH.format(branch=self.cfg.branch)
        unpushed = self._count(s, f"{remote_sha}..HEAD")
        data["blocked"] = {"kind": "conflict", "remote": remote_sha, "paths": c.paths}
        self._save(data)
        self.events.emit("sync_conflict", remote=remote_sha[:12], paths=c.paths, unpushed=unpushed, side_branch=side)
        paths = ", ".join(c.paths)
        return SyncOutcome(
            problem=Diagnosis(
                "git_conflict",
                "git conflict with the remote",
                f"The engine's {unpushed} unpushed commit(s) cannot be rebased onto {self.cfg.branch} at "
                f"{remote_sha[:12]}: both sides changed {paths}. The rebase was aborted, the working tree is "
                f"clean and the engine's commits are kept locally and on branch {side}.",
                f"On {self.cfg.branch}, revert the remote's change to {paths} (e.g. `git revert` the commit that "
                f"made it) and push; the engine then rebases and pushes its results by itself.",
            )
        )

    def _refuse_rewrite(self, s: GitSession, data: dict, processed: str, remote_sha: str) -> SyncOutcome:
        data["blocked"] = {"kind": "rewrite", "remote": remote_sha, "processed": processed}
        self._save(data)
        self.events.emit("sync_refused", reason="history rewritten", processed=processed[:12], remote=remote_sha[:12])
        return SyncOutcome(
            problem=Diagnosis(
                "history_rewritten",
                "remote history rewritten",
                f"{self.cfg.branch} on the remote was force-pushed to {remote_sha[:12]}, which no longer contains "
                f"{processed[:12]}, history the engine already processed. Nothing from the rewritten history was "
                "pulled or executed.",
                f"Restore the processed history: on the engine host run `git -C {self.ws.root} push --force "
                f"{self.remote_name} HEAD:{self.cfg.branch}`, then send the MP again.",
            )
        )

    # -- pushing ---------------------------------------------------------------------

    def _count(self, s: GitSession, spec: str) -> int:
        code, out, _ = s.status("rev-list", "--count", spec)
        return int(out.strip()) if code == 0 and out.strip().isdigit() else 0

    def _unpushed(self, s: GitSession) -> int:
        if s.rev("HEAD") is None:
            return 0
        return self._count(s, f"{self.tracking}..HEAD") if s.rev(self.tracking) else self._count(s, "HEAD")

    def _push(self, s: GitSession, out: SyncOutcome) -> None:
        """Push HEAD; on rejection fetch, verify, rebase and retry with bounded backoff."""
        head = s.rev("HEAD")
        if not self.cfg.push or head is None or head == s.rev(self.tracking) or self._load()["blocked"]:
            return
        try:
            for attempt in Retrying(
                stop=stop_after_attempt(self.cfg.push_attempts),
                wait=wait_exponential_jitter(
                    multiplier=0.05, max=self.cfg.push_backoff_max, jitter=self.cfg.push_backoff_max / 10
                ),
                retry=retry_if_exception_type(PushRejected),
                reraise=True,
            ):
                with attempt:
                    try:
                        self._push_once(s)
                    except PushRejected:
                        remote_sha = self._fetch(s)[0]
                        if remote_sha is not None:
                            step = self._integrate(s, remote_sha)
                            out.integrated |= step.integrated
                            if step.problem is not None:
                                out.problem = step.problem
                                return
                        raise
        except PushRejected as e:
            self.events.emit("sync_push_deferred", error=f"still rejected after {self.cfg.push_attempts} attempts: {e}")
            return
        head = s.rev("HEAD")
        assert head is not None
        s.set_refs({self.tracking: head, PROCESSED_REF: head})
        self.events.emit("sync_pushed", branch=self.cfg.branch, head=head[:12])

    def _push_once(self, s: GitSession) -> None:
        push_checked(s, self.remote_name, self.cfg.branch, self.cfg.timeout)

    # -- commits ---------------------------------------------------------------------

    STATUS_ARGS = (
        "-c",
        "core.untrackedCache=true",
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=normal",
        "--no-renames",
    )

    def _changes(self, s: GitSession) -> dict[str, Change]:
        """Every change in the tree, from one `git status`.

        `--untracked-files=normal` with the untracked cache (kept in the index) rescans only
        directories whose mtime moved; `=all` would list every file of every untracked
        directory on each call, which grows with the tree. A new directory is one entry
        (`dir/`); staging it stages what it holds."""
        raw = s.run(*self.STATUS_ARGS)
        changes: dict[str, Change] = {}
        for entry in raw.split("\0"):
            if len(entry) < 4:
                continue
            code, path = entry[:2], entry[3:]
            # Protocol files and run archives are staged whatever their content: no need to
            # hash them (the event log and step outputs can be large).
            owned = path in PROTOCOL_FILES or path.startswith((RUNS_PREFIX, *NEVER_STAGE))
            changes[path] = Change(path, code, "" if owned else _fingerprint(self.ws.root / path))
        return changes

    def _by_run(self, path: str, ch: Change, baseline: dict[str, Any]) -> bool:
        """Did the run whose baseline this is change `path`?

        A path changed during the run has a ctime after the run started (the kernel sets
        ctime on every write, rename, chmod or deletion of an entry, and no program can set
        it back). A path that was already dirty when the run started must also differ from
        its fingerprint then, so a file the MP only touched keeps the operator's edit local.
        An old-style baseline (fingerprints of every change) compares fingerprints only."""
        if "since_ns" not in baseline:
            return baseline.get(path) != ch.fingerprint
        before = baseline["dirty"].get(path)
        if before is not None and before == ch.fingerprint:
            return False
        return _ctime_ns(self.ws.root / path) >= baseline["since_ns"]

    def _select(self, changes: dict[str, Change], baseline: dict[str, Any] | None) -> tuple[list[str], dict[str, str]]:
        """The paths to commit for a run with this baseline, and what stays local (path ->
        fingerprint, the next run's dirty set)."""
        paths, left = [], {}
        for path, ch in changes.items():
            if path.startswith(NEVER_STAGE) or path == CONFIG_FILE:
                continue
            if path in PROTOCOL_FILES or path.startswith(RUNS_PREFIX):
                paths.append(path)
            elif path == INBOX_PATH:
                if ch.fingerprint == "deleted":  # only the engine's own removal travels
                    paths.append(path)
            elif baseline is not None and self._by_run(path, ch, baseline):
                paths.append(path)
            else:
                left[path] = ch.fingerprint
        return paths, left

    def _remember(self, data: dict[str, Any], left: dict[str, str], *, forget: str | None = None) -> None:
        """Store the dirty set that stays local and drop run `forget`'s baseline, in one write."""
        changed = data.get("dirty") != left
        data["dirty"] = left
        if forget is not None and data["baselines"].pop(forget, None) is not None:
            changed = True
        if changed:
            self._save(data, durable=False)

    def _commit(
        self,
        s: GitSession,
        message: str,
        run_id: str | None,
        changes: dict[str, Change] | None = None,
        *,
        finished: bool = False,
    ) -> str | None:
        """Commit the protocol files and what run `run_id` changed; return the new HEAD.
        `finished`: the run is over, so its baseline is dropped once the commit is made."""
        if changes is None:
            changes = self._changes(s)
        data = self._load()
        paths, left = self._select(changes, data["baselines"].get(run_id) if run_id else None)
        foreign = [p for p, ch in changes.items() if ch.code[0] not in " ?" and p not in paths]
        head = self._commit_paths(s, message, paths, foreign_staged=bool(foreign))
        self._remember(data, left, forget=run_id if finished else None)
        return head

    def _now_ctime_ns(self) -> int:
        """The kernel's file clock now: the ctime of a marker file written this instant.
        File times come from a coarse clock a tick behind `time.time()`; comparing like
        with like needs no margin."""
        marker = self.ws.local_dir / "gitsync.since"
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(str(os.getpid()))
        return marker.stat().st_ctime_ns

    def _commit_paths(self, s: GitSession, message: str, paths: list[str], *, foreign_staged: bool) -> str | None:
        """Stage `paths` by name and commit them (and nothing else); return the new HEAD.

        Plain `git commit` when nothing else is staged; `git commit --only` semantics
        (pathspec) otherwise, which rebuilds a temporary index and costs twice as much in a
        large tree."""
        if not paths:
            return None
        for path in paths:  # the run archive holds raw step output: mask before it travels
            if path.startswith(RUNS_PREFIX) and not path.endswith("/" + INBOX_FILE) and self.redact is not None:
                target = self.ws.root / path
                files = [target] if not target.is_dir() else [f for f in target.rglob("*") if f.is_file()]
                for f in files:
                    if f.name != INBOX_FILE:  # the MP as received stays byte-exact (its SHA-256)
                        redact_file(f, self.redact)  # type: ignore[arg-type]
        # `--literal-pathspecs`: these are file names, never patterns or `:(magic)`. A short
        # list goes on the command line (no file to create); a long one through a file.
        if sum(len(p) + 1 for p in paths) <= PATHS_ON_COMMAND_LINE:
            spec = ["--", *paths]
        else:
            spec_file = self.ws.local_dir / "gitsync.pathspec"
            atomic_write(spec_file, "\0".join(paths) + "\0", durable=False)
            spec = [f"--pathspec-from-file={spec_file}", "--pathspec-file-nul"]
        s.run("--literal-pathspecs", "add", "--all", *spec)
        only = spec if foreign_staged else []
        code, out, err = s.status(
            "--literal-pathspecs", *_identity(s), "commit", "--quiet", "--no-verify", "-m", message, *only
        )
        if code != 0:
            if "nothing to commit" in out + err or "no changes added" in out + err:
                return None
            raise SyncError(f"`git commit` failed ({code}): {(err or out).strip()}")
        head = s.rev("HEAD")
        # Everything staged went into this commit: the index now matches HEAD's tree.
        self._clean_index = None if foreign_staged else s.index_mark()
        self.events.emit("sync_committed", message=message, files=len(paths), head=head[:12] if head else None)
        return head

    def running(self, mp_id: str, run_id: str) -> SyncOutcome:
        """After RUNNING is written: remember when the run started and what was dirty (to
        know later what the MP changed); commit and push so the orchestrator sees RUNNING.

        No tree scan here: the RUNNING commit holds named paths only (the state, the event
        log, the new run archive), and the dirty set is the one the last commit left."""
        out = SyncOutcome()
        try:
            with self.session() as s:
                data = self._load()
                if run_id not in data["baselines"]:
                    data["baselines"][run_id] = {"since_ns": self._now_ctime_ns(), "dirty": data.get("dirty", {})}
                    self._save(data, durable=False)
                if self.cfg.commit_running:
                    paths = [p for p in (STATE_FILE, f"{RUNS_PREFIX}{run_id}") if (self.ws.root / p).exists()]
                    foreign = self._foreign_staged(s, paths)
                    if self._commit_paths(s, f"{mp_id}: RUNNING", paths, foreign_staged=bool(foreign)):
                        self._push(s, out)
        except RemoteUnreachable as e:
            self._mark_unreachable(str(e))
        except SyncError as e:
            self.events.emit("sync_failed", stage="running", error=str(e))
        return out

    def _foreign_staged(self, s: GitSession, paths: list[str]) -> list[str]:
        """Staged paths other than `paths`. No spawn when the index is byte-identical, over
        the same HEAD, to when the engine last left it with nothing staged."""
        if self._clean_index is not None and s.index_mark() == self._clean_index:
            return []
        staged = s.run("diff", "--cached", "--name-only", "-z").split("\0")
        return [p for p in staged if p and not any(p == q or p.startswith(q + "/") for q in paths)]

    def publish(self, message: str, run_id: str | None) -> SyncOutcome:
        """When an MP ended: commit its result and changes (`message` is the outcome's
        commit summary) and push. A push that fails leaves the commit for the next poll."""
        out = SyncOutcome()
        try:
            with self.session() as s:
                self._commit(s, message, run_id, finished=True)
                self._push(s, out)
                if (self._load()["blocked"] or {}).get("kind") == "conflict":
                    self._push_side_branch(s)
        except RemoteUnreachable as e:
            self._mark_unreachable(str(e))
        except SyncError as e:
            self.events.emit("sync_failed", stage="publish", error=str(e))
        return out

    def _push_side_branch(self, s: GitSession) -> None:
        side = BLOCKED_BRANCH.format(branch=self.cfg.branch)
        code, _o, err = s.status("push", "--force", "--quiet", self.remote_name, f"HEAD:refs/heads/{side}")
        if code != 0:
            self.events.emit("sync_failed", stage="push side branch", error=err.strip())

    # -- verdicts --------------------------------------------------------------------

    def refusal_for(self, data: bytes) -> InvalidMPError | None:
        """The signature refusal recorded for this exact MP, if any (consumed)."""
        state = self._load()
        reason = state["refusals"].pop(hashlib.sha256(data).hexdigest(), None)
        if reason is None:
            return None
        self._save(state)
        return InvalidMPError(
            f"it arrived in commits the engine does not accept (git.require_signed): {reason}",
            "Send it again from a commit signed with a key listed in the engine's allowed-signers file "
            "(`git commit -S`, with gpg.format = ssh and user.signingkey set), adding the `Approves:` header "
            "this result names.",
        )

    # -- status ----------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        """Remote, branch, unpushed commit count and any block, for `mp-engine status`."""
        info: dict[str, Any] = {"remote": self.cfg.remote, "branch": self.cfg.branch}
        try:
            with self.session() as s:
                info["unpushed"] = self._unpushed(s)
                info["head"] = (s.rev("HEAD") or "")[:12] or None
        except SyncError as e:
            info["error"] = str(e)
        blocked = self._load()["blocked"]
        if blocked:
            info["blocked"] = blocked
        return info


# -- helpers -------------------------------------------------------------------------


def push_checked(s: GitSession, remote_name: str, branch: str, timeout: float) -> None:
    """`git push --porcelain REMOTE HEAD:BRANCH` with every way it can fail checked; raises
    `PushRejected` when the remote has commits we lack.

    The porcelain output is git's stable machine format: one `FLAG<TAB>FROM:TO<TAB>SUMMARY`
    line per ref, `!` for a ref that was not updated. Read here rather than through
    GitPython's `Remote.push`, which does not raise on a rejected push
    (gitpython-developers/GitPython#621) and re-reads the config and starts two reader
    threads on every push."""
    refspec = f"HEAD:refs/heads/{branch}"
    args = ("push", "--porcelain", remote_name, refspec)
    code, out, err = s.status(*args, timeout=timeout)
    results = [line.split("\t") for line in out.splitlines() if line.count("\t") >= 2]
    for flag, _ref, summary, *_ in results:
        if flag == "!":
            if summary.startswith("[rejected]"):
                raise PushRejected(f"push of {branch} rejected: {summary}")
            raise SyncError(
                f"push of {branch} to {remote_name} failed: {summary}. "
                "The commit stays local; check the remote's hooks and permissions."
            )
    if code != 0:
        if re.search(r"\[rejected\]|non-fast-forward|fetch first", err):
            raise PushRejected(str(_failure(err, code, args)))
        raise _failure(err, code, args)
    if not results:
        raise RemoteUnreachable(f"`git push {remote_name} {refspec}` reported no result; will retry.")


def _fingerprint(path: Path) -> str:
    """Content hash of a changed path; for an untracked directory (one status entry),
    the newest ctime inside: it moves whenever anything in it is written."""
    try:
        if path.is_symlink():
            return "link:" + os.readlink(path)
        if path.is_dir():
            return f"dir:{_ctime_ns(path)}"
        h = hashlib.sha1()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except FileNotFoundError:
        return "deleted"
    except OSError as e:
        return f"unreadable:{e.errno}"


def _ctime_ns(path: Path) -> int:
    """ctime of `path` (the newest inside, for a directory); for a deleted path, of the
    nearest directory that still exists (a deletion sets its parent's ctime)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        parent = path.parent
        while not parent.exists():
            parent = parent.parent
        return parent.stat().st_ctime_ns
    newest = st.st_ctime_ns
    if stat.S_ISDIR(st.st_mode):
        for dirpath, _dirs, files in os.walk(path):
            for name in [*files, "."]:
                try:
                    newest = max(newest, os.lstat(os.path.join(dirpath, name)).st_ctime_ns)
                except FileNotFoundError:
                    continue
    return newest


_IDENTITY: dict[str, tuple[float, list[str]]] = {}


def _identity(s: GitSession) -> list[str]:
    """`-c user.*` when the repository has no identity, so a commit never fails on it.

    Asked of git at most once a minute per repository (two spawns saved per commit)."""
    key = str(s.repo.working_dir)
    cached = _IDENTITY.get(key)
    if cached is not None and time.monotonic() - cached[0] < 60:
        return cached[1]
    args = []
    if s.status("config", "user.name")[0] != 0:
        args += ["-c", "user.name=mp-engine"]
    if s.status("config", "user.email")[0] != 0:
        args += ["-c", "user.email=mp-engine@localhost"]
    _IDENTITY[key] = (time.monotonic(), args)
    return args


def _mp_of(run_id: str) -> str:
    return run_id.split("-", 1)[1] if "-" in run_id else run_id


def _held_open(path: Path) -> bool:
    """True if some process has `path` open (a live git holds its index.lock open)."""
    target = str(path)
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not pid.isdigit():
            continue
        fd_dir = f"/proc/{pid}/fd"
        try:
            for fd in os.listdir(fd_dir):
                if os.readlink(f"{fd_dir}/{fd}") == target:
                    return True
        except OSError:
            continue
    return False


# -- init --remote -------------------------------------------------------------------


def connect_workspace(directory: Path, url: str, branch: str, timeout: float = 120.0) -> list[str]:
    """`mp-engine init --remote`: clone into an empty directory, or attach an existing one.
    Returns what was done, for the CLI to print."""
    done: list[str] = []
    directory.mkdir(parents=True, exist_ok=True)
    g = git.Git(str(directory))
    g.update_environment(**noninteractive_env())
    if not any(directory.iterdir()):
        try:
            g.execute(
                ["git", "clone", "--quiet", "--origin", "origin", url, str(directory)], kill_after_timeout=timeout
            )
        except git.GitCommandError as e:
            raise _command_error(e, ("clone", url)) from e
        done.append(f"cloned {url}")
        repo = git.Repo(directory)
        try:
            if not repo.head.is_valid() or repo.active_branch.name != branch:
                code = repo.git.execute(
                    ["git", "checkout", "-q", branch], with_exceptions=False, with_extended_output=True
                )[0]
                if code != 0:
                    repo.git.execute(["git", "checkout", "-q", "-b", branch])
        finally:
            repo.close()
        return done
    if not (directory / ".git").exists():
        g.execute(["git", "init", "--quiet", "-b", branch])
        done.append("created a git repository")
    repo = git.Repo(directory)
    try:
        names = {r.name: r.url for r in repo.remotes}
        if "origin" not in names:
            repo.git.execute(["git", "remote", "add", "origin", url])
            done.append(f"added remote origin {url}")
        elif names["origin"] != url:
            raise SyncError(
                f"{directory} already has remote origin = {names['origin']}. "
                f"Run `git -C {directory} remote set-url origin {url}` if it should point at {url}."
            )
    finally:
        repo.close()
    return done


GIT_SECTION_RE = re.compile(r"^\[git\][ \t]*$", re.M)


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
                section = f"\n{key} = {val}" + section if not section.startswith("\n") else f"\n{key} = {val}" + section
        text = text[:start] + section + text[end:]
    atomic_write(config_file, text)


def _toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def setup_remote(directory: Path, url: str, branch: str) -> list[str]:
    """`mp-engine init --remote URL`: clone or attach, lay out the workspace, enable `[git]`,
    and commit and push the layout (the push may fail; `run` pushes it later)."""
    from mp_engine.config import load_config
    from mp_engine.workspace import init_workspace

    done = connect_workspace(Path(directory), url, branch)
    ws, created = init_workspace(directory)
    done += [f"created {p}" for p in created]
    enable_git_config(ws.config_file, "origin", branch)
    done.append(f"enabled [git] in {ws.rel(ws.config_file)} (remote origin, branch {branch})")
    layout = [p for p in (STATE_FILE, CONFIG_FILE, f"{SYSTEM_DIR}/.gitignore") if (ws.root / p).exists()]
    layout += [ws.rel(ws.inbox_dir / ".gitkeep"), ws.rel(ws.runs_dir / ".gitkeep")]
    sync = GitSync(ws, load_config(ws.root).git)
    with sync.session() as s:
        s.run("add", "--", *layout)
        if s.status("diff", "--cached", "--quiet")[0] != 0:
            s.run(*_identity(s), "commit", "--quiet", "--no-verify", "-m", "mp-engine: workspace layout", "--", *layout)
            done.append("committed the workspace layout")
        try:
            sync._push(s, SyncOutcome())
            done.append(f"pushed {branch} to {url}")
        except SyncError as e:
            done.append(f"not pushed yet ({e}); `mp-engine run` pushes it when the remote is reachable")
    return done
