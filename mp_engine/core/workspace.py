"""The workspace: where every MP-1.3 file lives, how it is created, and what is inside it.

One `Workspace` value names every path the engine owns, so no other module builds a path
by hand. `init` is idempotent and never overwrites. `confine` decides whether a path named
by an MP stays inside the workspace.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath

from mp_engine import __version__
from mp_engine.core.atomic import atomic_write, atomic_write_json
from mp_engine.core.clock import now_iso
from mp_engine.core.errors import ConfinementError, WorkspaceError

INBOX_DIR = "Claude_Inbox"
INBOX_FILE = "incoming_microproject.txt"
SYSTEM_DIR = "SYSTEM"
CONFIG_FILE = "mp-engine.toml"
STATE_FILE = "SESSION_STATE.json"
# What is never an agent's work: the engine's own files, and what agent CLIs keep beside the
# work (aider's chat history and repo-map cache). Not committed on the work branch, not
# counted as progress; an agent level's `{ignore_file}` lists them (aider's --aiderignore).
NOT_WORK = (STATE_FILE, SYSTEM_DIR, CONFIG_FILE, INBOX_DIR, ".aider*")
# A git pathspec of everything else (needs GIT_LITERAL_PATHSPECS=0 for the magic).
WORK_PATHSPEC = (".", *(f":(exclude){p}" for p in NOT_WORK))
RESULT_FILE = "RESULT_last.md"
EVENTS_FILE = "events.jsonl"
RUNS_DIR = "runs"
GIT_CONFIG_COPY = "git-config"  # in SYSTEM/.engine/: the .git/config the engine accepted (gitcmd.py)
RUN_LEDGER = "ledger.json"  # in SYSTEM/runs/<run>/, beside the MP's copy (named INBOX_FILE)
LOCAL_DIR = ".engine"  # machine-local runtime files (lock, owner, event log); never committed

SYSTEM_GITIGNORE = (
    f"# machine-local runtime files of mp-engine (lock, lock owner, the event log)\n{LOCAL_DIR}/\n"
    f"# where versions before 0.2 kept the event log (only here: runs/*/events.jsonl travel)\n/{EVENTS_FILE}\n"
)

# The workspace's own .gitignore (written by `init` when there is none): what a result
# commit must never carry, so an MP's check run does not push bytecode or a virtualenv.
ROOT_GITIGNORE = """# Written by `mp-engine init`: never committed with a result (edit freely).
__pycache__/
*.py[cod]
.pytest_cache/
.mypy_cache/
.ruff_cache/
.tox/
.venv/
venv/
node_modules/
*.egg-info/
.DS_Store
# the engine's host-local files (lock, queue, event log)
/SYSTEM/.engine/
"""


class Workspace:
    """Every path of one workspace, rooted at an absolute, symlink-free `root`. (A plain
    class, not a dataclass: `status` imports this module, and dataclasses with its
    `inspect` would be a tenth of its start-up, bench figure 8.)"""

    __slots__ = ("root",)
    root: Path  # set once in __init__, through object.__setattr__ (instances are immutable)

    def __init__(self, root: Path):
        object.__setattr__(self, "root", Path(root))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Workspace is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workspace) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    def __repr__(self) -> str:
        return f"Workspace(root={self.root!r})"

    @classmethod
    def at(cls, root: Path | str) -> Workspace:
        return cls(Path(os.path.realpath(Path(root).expanduser())))

    @property
    def inbox_dir(self) -> Path:
        return self.root / INBOX_DIR

    @property
    def inbox_file(self) -> Path:
        return self.inbox_dir / INBOX_FILE

    @property
    def system_dir(self) -> Path:
        return self.root / SYSTEM_DIR

    @property
    def state_file(self) -> Path:
        return self.root / STATE_FILE

    @property
    def result_file(self) -> Path:
        return self.system_dir / RESULT_FILE

    @property
    def events_file(self) -> Path:
        """The host's event log, beside its rotated files; never committed (each run's own
        events travel in its archive, `runs/<run>/events.jsonl`)."""
        return self.local_dir / EVENTS_FILE

    @property
    def legacy_events_file(self) -> Path:
        """Where versions before 0.2 kept the event log (and committed it)."""
        return self.system_dir / EVENTS_FILE

    @property
    def runs_dir(self) -> Path:
        return self.system_dir / RUNS_DIR

    @property
    def local_dir(self) -> Path:
        return self.system_dir / LOCAL_DIR

    @property
    def evals_dir(self) -> Path:
        """Where `mp-engine eval` keeps its evals by default (docs/EVAL.md); the dashboard
        shows their reports."""
        return self.local_dir / "eval"

    @property
    def stop_file(self) -> Path:
        """SYSTEM/STOP: while it exists, agent MPs end BACKPRESSURE (docs/AGENT.md)."""
        return self.system_dir / "STOP"

    @property
    def lock_file(self) -> Path:
        return self.local_dir / "workspace.lock"

    @property
    def daemon_lock_file(self) -> Path:
        """Held by `mp-engine run` for its life (lock.DaemonLock): whether a daemon runs."""
        return self.local_dir / "daemon.lock"

    @property
    def config_file(self) -> Path:
        return self.root / CONFIG_FILE

    def rel(self, path: Path) -> str:
        """`path` relative to the root, POSIX style, for messages and results."""
        try:
            return Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def ensure_dirs(self) -> None:
        """Create the directories the engine needs at run time (not the state file)."""
        for d in (self.inbox_dir, self.system_dir, self.runs_dir, self.local_dir):
            d.mkdir(parents=True, exist_ok=True)

    def check(self) -> None:
        """Raise `WorkspaceError` unless this looks like an initialised workspace."""
        if not self.root.is_dir():
            raise WorkspaceError(
                f"workspace root {self.root} does not exist. Create it with `mp-engine init {self.root}`."
            )
        if not self.state_file.exists():
            raise WorkspaceError(
                f"{self.root} is not an mp-engine workspace ({STATE_FILE} is missing). "
                f"Run `mp-engine init {self.root}` first."
            )

    # -- confinement ---------------------------------------------------------------

    def protected(self, parts: tuple[str, ...]) -> bool:
        """True for paths the engine owns and an MP's `file` block must not write."""
        if ".git" in parts:
            return True
        top = parts[0]
        if top in (STATE_FILE, CONFIG_FILE, INBOX_DIR):
            return True
        owned = (RESULT_FILE, "RESULT_last.json", "results.jsonl", "results.1.jsonl", EVENTS_FILE, RUNS_DIR, LOCAL_DIR)
        return top == SYSTEM_DIR and len(parts) > 1 and parts[1] in owned

    def _parts(self, relpath: str) -> list[str]:
        """The components of `relpath` (as written in an MP), checked lexically: not
        absolute, not climbing out with `..`, not the root, not an engine-owned path."""
        if not relpath or "\0" in relpath:
            raise ConfinementError("the path is empty or contains a NUL byte")
        pure = PurePosixPath(relpath.replace("\\", "/"))
        if pure.is_absolute() or (len(relpath) > 1 and relpath[1] == ":"):
            raise ConfinementError(
                f"{relpath!r} is an absolute path; file blocks take paths relative to the workspace root"
            )
        parts: list[str] = []
        for part in pure.parts:
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    raise ConfinementError(f"{relpath!r} climbs out of the workspace with '..'")
                parts.pop()
                continue
            parts.append(part)
        if not parts:
            raise ConfinementError(f"{relpath!r} names the workspace root itself, not a file")
        if self.protected(tuple(parts)):
            raise ConfinementError(f"{relpath!r} is owned by mp-engine (state, results, inbox, config or .git)")
        return parts

    def confine(self, relpath: str) -> Path:
        """Where `relpath` (as written in an MP) lands inside the workspace, checked
        lexically: absolute paths, `..` that climbs out and engine-owned files are refused.
        Writing goes through `write_confined`, which also refuses every symlink."""
        return self.root.joinpath(*self._parts(relpath))

    def write_confined(self, relpath: str, data: bytes) -> Path:
        """Write a `file` block: create the missing directories and replace the file
        atomically, walking from the root one component at a time with `O_NOFOLLOW`
        relative to the directory opened before it. A symlink anywhere in the path
        (planted by an earlier step, or swapped in while this runs) is refused, so the
        bytes land exactly where the lexical path says: inside the workspace and outside
        the engine's files. Raises `ConfinementError`, or `OSError` for the file system's
        own refusals."""
        parts = self._parts(relpath)
        flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.root, flags)
        try:
            for i, part in enumerate(parts[:-1]):
                try:
                    nxt = os.open(part, flags, dir_fd=fd)
                except FileNotFoundError:
                    try:
                        os.mkdir(part, 0o777, dir_fd=fd)  # less the umask, as mkdir -p
                    except FileExistsError:
                        pass  # made meanwhile: opened (and checked) below
                    nxt = os.open(part, flags, dir_fd=fd)
                except OSError as e:
                    if os.path.islink(self.root.joinpath(*parts[: i + 1])) or e.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise ConfinementError(
                            f"{relpath!r} passes through {'/'.join(parts[: i + 1])!r}, which is a symlink or not a "
                            "directory; mp-engine never writes through symlinks"
                        ) from e
                    raise
                os.close(fd)
                fd = nxt
            try:
                st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISLNK(st.st_mode):
                raise ConfinementError(f"{relpath!r} is a symlink; mp-engine does not write through symlinks")
            atomic_write(Path(parts[-1]), data, dir_fd=fd)
        finally:
            os.close(fd)
        return self.root.joinpath(*parts)


def initial_state() -> dict:
    return {
        "engine_version": __version__,
        "last_completed": None,
        "current": "IDLE",
        "status": "OFFLINE",
        "last_updated": now_iso(),
    }


def config_template() -> str:
    from importlib import resources  # lazy: read-only commands start fast (bench figure 8)

    return resources.files("mp_engine").joinpath("templates/mp-engine.toml").read_text(encoding="utf-8")


def init_workspace(root: Path | str) -> tuple[Workspace, list[str]]:
    """Create a workspace at `root`; return it and the paths created. Never overwrites."""
    ws = Workspace.at(root) if Path(root).exists() else Workspace(Path(root).expanduser().absolute())
    ws.root.mkdir(parents=True, exist_ok=True)
    ws = Workspace.at(ws.root)
    created: list[str] = []
    for d in (ws.inbox_dir, ws.system_dir, ws.runs_dir):
        if not d.exists():
            d.mkdir(parents=True)
            created.append(ws.rel(d) + "/")
    files = {
        ws.inbox_dir / ".gitkeep": "",
        ws.runs_dir / ".gitkeep": "",
        ws.system_dir / ".gitignore": SYSTEM_GITIGNORE,
        ws.root / ".gitignore": ROOT_GITIGNORE,
        ws.config_file: config_template(),
    }
    for path, text in files.items():
        if not path.exists():
            atomic_write(path, text)
            created.append(ws.rel(path))
    if not ws.state_file.exists():
        atomic_write_json(ws.state_file, initial_state())
        created.append(ws.rel(ws.state_file))
    ws.local_dir.mkdir(exist_ok=True)
    return ws, created


def move_legacy_event_log(ws: Workspace, emit) -> None:
    """Versions before 0.2 kept the event log at SYSTEM/events.jsonl (and committed it):
    move it to SYSTEM/.engine/, where git never touches it. `emit(event, **fields)`."""
    old, new = ws.legacy_events_file, ws.events_file
    if not old.is_file() or old.is_symlink():
        return
    if new.exists():  # something wrote the new log first (`init`, a CLI): old lines go first
        atomic_write(new, old.read_bytes() + new.read_bytes())
        old.unlink()
    else:
        new.parent.mkdir(parents=True, exist_ok=True)
        os.rename(old, new)
    emit("event_log_moved", path=ws.rel(new), was=ws.rel(old))
