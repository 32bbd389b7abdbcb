"""SESSION_STATE.json as the read-only commands read it: the raw JSON, with the same
attribute names as `state.SessionState`, without pydantic.

`status` is polled by scripts (bench figure 8); pydantic's import alone costs more than
its whole budget. The engine itself always reads and writes through `StateStore`, which
validates; this view only reads what that wrote.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from mp_engine.core.errors import StateError


class HaltFields(Protocol):
    """What a line about a halt reads: `state.Halt` or `HaltView`."""

    @property
    def mp_id(self) -> str: ...
    @property
    def reason(self) -> str: ...


class StateFields(Protocol):
    """What a line about the state reads: `state.SessionState` or `StateView`."""

    @property
    def current(self) -> str: ...
    @property
    def run_id(self) -> str | None: ...
    @property
    def halt(self) -> HaltFields | None: ...
    @property
    def waiting(self) -> dict[str, Any] | None: ...
    @property
    def last_result(self) -> dict[str, Any] | None: ...


class HaltView:
    def __init__(self, raw: dict[str, Any]):
        self.raw = raw
        self.mp_id = str(raw.get("mp_id"))
        self.run_id = str(raw.get("run_id"))
        self.reason = str(raw.get("reason"))
        self.since = str(raw.get("since"))

    def model_dump(self) -> dict[str, Any]:
        return dict(self.raw)


class StateView:
    def __init__(self, raw: dict[str, Any]):
        self.raw = raw
        self.status: str = str(raw.get("status", "OFFLINE"))
        self.current: str = str(raw.get("current", "IDLE"))
        self.last_completed = raw.get("last_completed")
        self.last_updated: str = str(raw.get("last_updated", ""))
        self.run_id = raw.get("run_id")
        self.last_result = raw.get("last_result")
        self.waiting = raw.get("waiting")
        self.daemon = raw.get("daemon")
        self.halt = HaltView(raw["halt"]) if isinstance(raw.get("halt"), dict) else None

    def to_json(self) -> dict[str, Any]:
        return {
            "engine_version": self.raw.get("engine_version"),
            "last_completed": self.last_completed,
            "current": self.current,
            "status": self.status,
            "last_updated": self.last_updated,
            "run_id": self.run_id,
            "halt": self.halt.model_dump() if self.halt else None,
            "last_result": self.last_result,
            "waiting": self.waiting,
            **{k: v for k, v in self.raw.items() if k not in FIELDS},
        }


FIELDS: tuple[str, ...] = ("engine_version", "last_completed", "current", "status", "last_updated", "run_id", "halt")
FIELDS += ("last_result", "waiting")


def read_state_json(path: Path) -> Any:
    """The state file's JSON; `StateError` (what to do) when it is missing or not JSON.
    `StateStore.read` validates it further, `read_view` only checks the fields."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise StateError(f"{path} is missing. Run `mp-engine init` in the workspace root.") from e
    except (ValueError, UnicodeDecodeError) as e:
        raise StateError(
            f"{path} is not valid JSON ({e}). mp-engine only writes it atomically, so something "
            f"else edited it: restore it from git (`git checkout -- {Path(path).name}`)."
        ) from e


def read_view(path: Path) -> StateView:
    """The state file's content, for reading only."""
    raw = read_state_json(path)
    if not isinstance(raw, dict) or not all(k in raw for k in ("status", "current", "last_updated")):
        raise StateError(f"{path} does not hold valid MP-1.3 fields. Restore it from git.")
    return StateView(raw)
