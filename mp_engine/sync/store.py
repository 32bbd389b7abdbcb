"""`SYSTEM/.engine/gitsync.json`: what the channel must remember across restarts.

- `baselines`: per open run, when it started and what was already dirty (attribution.py);
- `dirty`: the changes the last commit left local (the next run's baseline);
- `refusals`: signature verdicts keyed by the MP's SHA-256 (consumed at claim time);
- `blocked`: a conflict or a rewrite the engine stopped on, until the remote moves;
- `unpublished`: results whose commit is not made yet (retried until it is).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mp_engine.core.atomic import atomic_write


class SyncStore:
    def __init__(self, path: Path):
        self.path = path

    def load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            data = {}
        data.setdefault("baselines", {})
        data.setdefault("refusals", {})
        data.setdefault("blocked", None)
        return data

    def save(self, data: dict[str, Any], *, durable: bool = True) -> None:
        """Signature refusals and blocks are saved durably; attribution bookkeeping with
        `durable=False`: it survives a `kill -9`, and after a power loss the file read back
        is an older one that still holds every refusal and block, while the MP's changes
        then stay local for the operator."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Compact: json's C encoder does not run with `indent` (`jq . gitsync.json` to read it).
        text = json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False) + "\n"
        atomic_write(self.path, text, durable=durable)

    def blocked(self) -> dict[str, Any] | None:
        return self.load()["blocked"]
