"""The pull requests this host watches for review (issue #41): one entry per pull request
whose run ended EXACT with CI green, put there by the run at its end and taken out when the
pull request is merged or closed, when a run on it ends short of EXACT, or when its review
rounds are used up. The engine's tick looks at each entry now and then
(pipeline/reviewing.py); the run's ledger stays the record of what the session did, this
file only says where to look and what was already seen there.

    SYSTEM/.engine/pull_requests.json   {"app#12": {...one Watched...}, ...}

Written whole and atomically; a lost write is repeated by the run's end (replayed after a
crash) or by the next look.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from mp_engine.core.atomic import atomic_write

FILE = "pull_requests.json"  # in SYSTEM/.engine/


@dataclass(frozen=True)
class Watched:
    """One open pull request waiting for review, and the run that carries it."""

    repo: str
    number: int
    url: str
    head: str
    base: str
    run_id: str
    mp_id: str
    since: str  # the session's first push: comments from then on are read
    sha: str  # the engine's last push (what a merge merges, the next push's lease)
    green: bool  # CI passed on it (or the repository has none)
    review_rounds: int  # rounds acted on so far
    acted: tuple[str, ...] = field(default=())  # comment keys acted on or ignored: never again

    @property
    def key(self) -> str:
        return f"{self.repo}#{self.number}"


class WatchList:
    def __init__(self, path: Path):
        self.path = Path(path)

    @classmethod
    def at(cls, local_dir: Path) -> WatchList:
        """The host's list (`local_dir`: SYSTEM/.engine)."""
        return cls(Path(local_dir) / FILE)

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(data, indent=1, sort_keys=True) + "\n")

    def all(self) -> list[Watched]:
        out = []
        for raw in self._read().values():
            try:
                out.append(Watched(**{**raw, "acted": tuple(raw.get("acted", ()))}))
            except TypeError:  # an entry of another version: looked at no more
                continue
        return out

    def get(self, key: str) -> Watched | None:
        return next((w for w in self.all() if w.key == key), None)

    def put(self, w: Watched) -> None:
        """Watch `w` (again): what was acted on or ignored before stays so."""
        data = self._read()
        before = data.get(w.key, {}).get("acted", [])
        data[w.key] = asdict(replace(w, acted=tuple(sorted({*before, *w.acted}))))
        self._write(data)

    def seen(self, key: str, keys: Iterable[str]) -> None:
        """Comments seen and not to be acted on (ignored, with the event saying why)."""
        data = self._read()
        if key in data:
            data[key]["acted"] = sorted({*data[key].get("acted", []), *keys})
            self._write(data)

    def drop(self, key: str) -> None:
        data = self._read()
        if data.pop(key, None) is not None:
            self._write(data)
