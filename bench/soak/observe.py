"""Reading what the engine wrote, from the files only: the remote's history (the bare
repository, read directly so an outage does not blind the checker), and the host's
results index, run archives and event log, followed as they grow, rotate and are pruned.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INDEX = ("SYSTEM/results.1.jsonl", "SYSTEM/results.jsonl")


def result_key(entry: dict[str, Any]) -> tuple[str, str, str]:
    return (str(entry.get("run_id")), str(entry.get("status")), str(entry.get("finished_at")))


def parse_lines(text: str, where: str, torn: list[str]) -> list[dict[str, Any]]:
    """JSON lines; a line that does not parse is torn (recorded), except a last line without
    its newline, which a writer may still be appending."""
    out = []
    lines = text.split("\n")
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            if n < len(lines) - 1:
                torn.append(f"{where}: line {n + 1} does not parse: {line[:120]!r}")
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


class RemoteView:
    """The bare repository: its tip, results index (both files, every version seen kept),
    files at a ref, branches, the run archives it holds."""

    def __init__(self, bare: Path, env: dict[str, str]):
        self.bare, self.env = bare, env
        self.results: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.torn: list[str] = []
        self._seen_tip = ""

    def git(self, *args: str, check: bool = False) -> str | None:
        proc = subprocess.run(["git", *args], cwd=self.bare, env=self.env, capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            if check:
                raise RuntimeError(f"git {' '.join(args)} in {self.bare}: {proc.stderr.strip()}")
            return None
        return proc.stdout

    def tip(self, ref: str = "main") -> str:
        return (self.git("rev-parse", "-q", "--verify", f"refs/heads/{ref}") or "").strip()

    def show(self, path: str, ref: str = "main") -> str | None:
        return self.git("show", f"{ref}:{path}")

    def refresh(self) -> bool:
        """Read the index at the tip when it moved; True when it did."""
        tip = self.tip()
        if not tip or tip == self._seen_tip:
            return False
        for path in INDEX:
            for entry in parse_lines(self.show(path, tip) or "", f"remote {path} at {tip[:12]}", self.torn):
                self.results.setdefault(result_key(entry), entry)
        self._seen_tip = tip
        return True

    def result_doc(self, run_id: str) -> dict[str, Any] | None:
        """The run's result.json on the remote, or from the history once pruned."""
        path = f"SYSTEM/runs/{run_id}/result.json"
        for ref in ["main", *(self.git("log", "--format=%H", "-n", "3", "main", "--", path) or "").split()]:
            for at in (ref, f"{ref}^"):
                text = self.show(path, at)
                if text:
                    try:
                        return json.loads(text)
                    except ValueError:
                        continue
        return None

    def branches(self, prefix: str) -> list[str]:
        out = self.git("for-each-ref", "--format=%(refname:short)", f"refs/heads/{prefix}") or ""
        return out.split()

    def runs(self) -> list[str]:
        out = self.git("ls-tree", "--name-only", "main", "SYSTEM/runs/") or ""
        return [p.rsplit("/", 1)[-1] for p in out.split() if not p.endswith(".gitkeep")]

    def contains(self, commit: str) -> bool:
        """Whether the remote's main holds `commit` (the engine's work reached it)."""
        return self.git("merge-base", "--is-ancestor", commit, "main") is not None

    def subjects(self, ref: str) -> list[str]:
        return (self.git("log", "--format=%s", ref) or "").splitlines()


@dataclass
class Run:
    run_id: str
    mp_id: str
    status: str | None = None
    kind: str | None = None  # the diagnosis's kind
    started: str | None = None
    finished: str | None = None
    retried: dict[str, int] = field(default_factory=dict)  # step id -> recoveries that re-ran it
    mtime: float = 0.0


class HostView:
    """The engine host's files: the results index (every line seen, across its rotation),
    the run archives (harvested before retention prunes them), the event log (followed
    across its rotation)."""

    def __init__(self, root: Path):
        self.root = root
        self.results: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.torn: list[str] = []
        self.runs: dict[str, Run] = {}
        self.events = EventTail(root / "SYSTEM/.engine/events.jsonl")

    def refresh(self) -> None:
        for path in INDEX:
            try:
                text = (self.root / path).read_text(encoding="utf-8")
            except FileNotFoundError:
                continue
            for entry in parse_lines(text, f"host {path}", self.torn):
                self.results.setdefault(result_key(entry), entry)
        self.harvest()
        self.events.read()

    def harvest(self) -> None:
        runs = self.root / "SYSTEM/runs"
        for d in runs.iterdir() if runs.is_dir() else ():
            result = d / "result.json"
            if not d.is_dir():
                continue
            try:
                mtime = result.stat().st_mtime
            except FileNotFoundError:
                continue
            known = self.runs.get(d.name)
            if known is not None and known.mtime == mtime:
                continue
            try:
                doc = json.loads(result.read_text())
                ledger = read_ledger(d)
            except (OSError, ValueError) as e:
                self.torn.append(f"host run {d.name}: {e}")
                continue
            run = Run(d.name, doc.get("mp_id"), doc.get("status"), (doc.get("diagnosis") or {}).get("kind"))
            run.started, run.finished = doc.get("started_at"), doc.get("finished_at")
            for rec in ledger.get("recoveries") or []:
                for step in rec.get("steps_to_retry") or []:
                    run.retried[step] = run.retried.get(step, 0) + 1
            run.mtime = mtime
            self.runs[d.name] = run


def read_ledger(run_dir: Path) -> dict[str, Any]:
    """ledger.json with its journal's lines of the current generation applied (PROTOCOL §8)."""
    ledger = json.loads((run_dir / "ledger.json").read_text())
    gen = ledger.get("journal_gen")
    steps = {s["step_id"]: s for s in ledger.get("steps") or [] if "step_id" in s}
    try:
        journal = (run_dir / "ledger.journal").read_text().splitlines()
    except FileNotFoundError:
        journal = []
    for line in journal:
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line a crash cut short is never applied
        if rec.get("gen") == gen and isinstance(rec.get("step"), dict) and "step_id" in rec["step"]:
            steps[rec["step"]["step_id"]] = rec["step"]
    ledger["steps"] = list(steps.values())
    return ledger


class EventTail:
    """The host's event log, followed across rotation (events.jsonl -> events.jsonl.1 ...):
    every line once, counted by event name; the lines of a few names kept."""

    KEEP = {"halted", "recovery", "tick_failed", "alert_failed", "alert_sent", "alert_deferred", "disk_full"}

    def __init__(self, path: Path):
        self.path = path
        self.ino: int | None = None
        self.offset = 0
        self.counts: dict[str, int] = {}
        self.kept: list[dict[str, Any]] = []
        self.torn = 0

    def read(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return
        if self.ino is not None and st.st_ino != self.ino:
            old = self._rotated(self.ino)  # finish the file it became, then start the new one
            if old is not None:
                self._consume(old)
            self.ino, self.offset = st.st_ino, 0
        self.ino = st.st_ino
        self._consume(self.path)

    def _rotated(self, ino: int) -> Path | None:
        for p in sorted(self.path.parent.glob(self.path.name + ".*")):
            try:
                if p.stat().st_ino == ino:
                    return p
            except FileNotFoundError:
                continue
        return None

    def _consume(self, path: Path) -> None:
        try:
            with open(path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1  # a line still being written waits for the next read
        for line in data[:end].splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                self.torn += 1
                continue
            name = e.get("event", "?")
            self.counts[name] = self.counts.get(name, 0) + 1
            if name in self.KEEP:
                self.kept.append(e)
        self.offset += end

    def files(self) -> list[Path]:
        return [p for p in [self.path, *self.path.parent.glob(self.path.name + ".*")] if p.exists()]

    def sizes(self) -> list[int]:
        return [os.path.getsize(p) for p in self.files()]
