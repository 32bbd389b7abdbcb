"""The dashboard's JSON documents (docs/PROTOCOL.md §9): `/api/v1/state`, `/api/v1/runs`
and `/api/v1/runs/<run_id>`. Each is read from the workspace on request, like `status`
(the directory is the truth); the pages are rendered from the same documents.

What would make a request slow is kept apart: the git report (a git session) is cached
for `GIT_TTL` seconds, a finished run's result.json, which never changes, is read once
per (run, mtime), and the archive's run names once per change of its directory
(`ResultCache`)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mp_engine.agent.progress import Progress
from mp_engine.core.atomic import read_tail, sha256_file
from mp_engine.core.clock import now_iso, parse_iso
from mp_engine.core.workspace import RUN_LEDGER, Workspace
from mp_engine.daemon.health import read_last_sync_ok
from mp_engine.inbox.kinds import EntryKind, slot
from mp_engine.inbox.mpfile import parse_head
from mp_engine.inbox.queue import FROM_QUEUE, SEEN, MPQueue
from mp_engine.record import journal
from mp_engine.record.digest import read_result
from mp_engine.sync.heartbeat import last_beat_at
from mp_engine.views.history import history, run_names
from mp_engine.views.status import status_report

SCHEMA = "mp-engine/dashboard/1"
GIT_TTL = 5.0  # seconds a git report (unpushed commits, a blocked push) is reused
RACY_NS = 2_000_000_000  # a directory changed this recently may change again within its mtime's tick
TAIL_BYTES = 2048  # of each output shown


class ResultCache:
    """result.json of finished runs, read once per (run, mtime): a history of 1,000 runs
    then costs one stat per run (bench figure 19). The archive's run names, listed again
    only when its directory changed: at 10,000 runs the listing was most of a history
    page (bench figure 25)."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, dict[str, Any] | None]] = {}
        self._names: tuple[int, list[str]] | None = None
        self._lock = threading.Lock()

    def names(self, ws: Workspace) -> list[str]:
        """run_names(ws), reused while the directory's mtime stays (a run added, renamed
        into place or pruned changes it). A listing taken within RACY_NS of a change is not
        kept: a second change in the same tick of the clock would leave the mtime as it was."""
        try:
            mtime = os.stat(ws.runs_dir).st_mtime_ns
        except OSError:
            return []
        with self._lock:
            if self._names is not None and self._names[0] == mtime:
                return self._names[1]
        names = run_names(ws)
        if time.time_ns() - mtime > RACY_NS:
            with self._lock:
                self._names = (mtime, names)
        return names

    def get(self, run_dir: Path) -> dict[str, Any] | None:
        path = run_dir / "result.json"
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            return None
        with self._lock:
            hit = self._seen.get(run_dir.name)
        if hit is not None and hit[0] == mtime:
            return hit[1]
        doc = read_result(run_dir)
        with self._lock:
            self._seen[run_dir.name] = (mtime, doc)
        return doc


class Documents:
    """Builds the three documents for one workspace. `redact` masks secrets in output
    tails (the values `[secrets]` names; sync/redact.py)."""

    def __init__(self, ws: Workspace, config: dict[str, Any], redact: Callable[[str], str] = str):
        self.ws = ws
        self.cfg = config
        self.redact = redact
        self.results = ResultCache()
        self._git: tuple[float, dict[str, Any] | None] = (0.0, None)

    # -- /api/v1/state -------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        ws = self.ws
        # The report of `status --json`, without the slow parts (git session, Temporal survey).
        cfg = {**self.cfg, "git": {**self.cfg["git"], "enabled": False}, "fleet": {}}
        doc = status_report(ws, cfg)
        state = doc["state"]
        doc.update(schema=SCHEMA, generated_at=now_iso(), queue=self.queue())
        doc["heartbeat"] = self.heartbeat(state)
        if self.cfg["git"]["enabled"]:
            doc["git"] = self.git()
            doc["last_sync"] = read_last_sync(ws)
        if "step" in doc:
            doc["step"]["output_tail"] = [self.redact(line) for line in doc["step"].get("output_tail", [])]
        if state.get("run_id"):
            doc["running"] = self.running(str(state["run_id"]), doc)
        elif (state.get("last_result") or {}).get("run_id"):
            doc["last_run"] = self.last_run(str(state["last_result"]["run_id"]))
        if doc.get("halt"):
            doc["halt"].update(self.halted_on(str(doc["halt"].get("run_id"))))
        doc["actions"] = actions(ws, doc)
        return doc

    def halted_on(self, run_id: str) -> dict[str, Any]:
        """The halted run's diagnosis, its one fix and, when it ended asking, the question."""
        res = self.results.get(self.ws.runs_dir / run_id) or {}
        d = res.get("diagnosis") or {}
        asked = res.get("answerable")
        return {
            "title": res.get("title"),
            "summary": d.get("summary"),
            "diagnosis": d.get("text"),
            "fix": res.get("fix"),
            "question": asked,
        }

    def heartbeat(self, state: dict[str, Any]) -> dict[str, Any]:
        """How fresh the engine's signs of life are: its last pushed heartbeat (git on) and
        the state file's last write."""
        out: dict[str, Any] = {
            "state_written_at": state.get("last_updated"),
            "state_age": age(state.get("last_updated")),
        }
        if self.cfg["git"]["enabled"]:
            at = last_beat_at(self.ws.local_dir)
            out.update(pushed_at=at, age=age(at), interval=self.cfg["git"].get("heartbeat_interval"))
        return out

    def git(self) -> dict[str, Any] | None:
        at, report = self._git
        if report is None or time.monotonic() - at > GIT_TTL:
            from mp_engine.config.sections import GitConfig
            from mp_engine.sync.channel import GitChannel

            report = GitChannel(self.ws, GitConfig.model_validate(self.cfg["git"])).report()
            self._git = (time.monotonic(), report)
        return report

    def queue(self) -> list[dict[str, Any]]:
        """The queued versions, oldest first, as the engine will take them (pipeline/queued.py):
        a local version still in the slot is the slot's MP (`pending`), not listed twice; one
        replaced there before it ran is `superseded`: it never runs, it ends SUPERSEDED."""
        out = []
        in_slot = self.slot_sha256()
        for q in MPQueue(self.ws.local_dir / "queue").entries():
            if q.kind not in FROM_QUEUE and q.sha256 == in_slot:
                continue
            entry: dict[str, Any] = {
                "id": q.id,
                "kind": q.kind,
                "observed_at": q.observed_at,
                "sha256": q.sha256,
                "superseded": q.kind == SEEN,
            }
            try:
                mp_id, title, _ = parse_head(q.data(), max_bytes=self.cfg["engine"]["max_mp_bytes"])
                entry.update(mp_id=mp_id, title=title)
            except Exception as e:  # an unreadable entry is shown as such, never a failed page
                entry["invalid"] = str(e)[:300]
            out.append(entry)
        return out

    def slot_sha256(self) -> str | None:
        """The SHA-256 of the MP file in the inbox slot (not a link, within the size cap)."""
        entry = slot(self.ws.inbox_file)
        if entry is None or entry[0] is not EntryKind.FILE or entry[1] > self.cfg["engine"]["max_mp_bytes"]:
            return None
        return sha256_file(self.ws.inbox_file) or None

    def running(self, run_id: str, doc: dict[str, Any]) -> dict[str, Any]:
        """The running MP: its steps (shell) or its task board (agent), with the live tails."""
        run_dir = self.ws.runs_dir / run_id
        out: dict[str, Any] = {"run_id": run_id}
        ledger = ledger_of(run_dir)
        out.update(
            mp_id=ledger.get("mp_id"), started_at=ledger.get("created_at"), elapsed=age(ledger.get("created_at"))
        )
        if "agent" in doc:
            out["board"] = self.board(run_dir, doc["agent"])
        else:
            out["steps"] = [
                {k: st.get(k) for k in ("step_id", "status", "started_at", "finished_at", "exit_code")}
                for st in ledger.get("steps") or []
            ]
        return out

    def last_run(self, run_id: str) -> dict[str, Any]:
        """The MP that ended last, so its final board stays in view until the next starts."""
        run_dir = self.ws.runs_dir / run_id
        res = self.results.get(run_dir) or {}
        out = {"run_id": run_id, "mp_id": res.get("mp_id"), "status": res.get("status"), "board": None}
        tasks = res.get("micro_tasks")
        if tasks:
            out["board"] = self.board(run_dir, {"tasks": tasks, "usage": res.get("usage")})
        return out

    def board(self, run_dir: Path, agent: dict[str, Any]) -> dict[str, Any]:
        """The agent run's task board: each task with its dependencies, status, level,
        iteration, residual, elapsed against the budget, last output line and commit."""
        progress = Progress.load(run_dir)
        data = progress.data if progress else {}
        running = {r["mt"]: r for r in agent.get("running") or []}
        current = agent.get("current") or {}
        plan = {p["id"]: p for p in data.get("plan") or []}
        tasks = []
        for t in agent.get("tasks") or []:
            live = running.get(t["mt_id"])
            if live is None and current.get("active_mt") == t["mt_id"] and t["status"] == "active":
                live = {
                    "iteration": current.get("iteration"),
                    "level": current.get("level"),
                    "level_name": current.get("level_name"),
                }
            residuals = t.get("residuals") or []
            tasks.append(
                {
                    "mt_id": t["mt_id"],
                    "title": t.get("title"),
                    "status": "running" if live else t["status"],
                    "after": (plan.get(t["mt_id"]) or {}).get("after") or [],
                    "iteration": (live or {}).get("iteration") or t.get("iterations"),
                    "level": (live or {}).get("level", t.get("final_level")),
                    "level_name": (live or {}).get("level_name") or (t.get("level_names") or [None])[-1],
                    "residual": residuals[-1] if residuals else None,
                    "elapsed": (live or {}).get("elapsed"),
                    "last_line": self.redact(str((live or {}).get("last_line") or "")) or None,
                    "commit": t.get("commit"),
                    "evidence": self.evidence(run_dir, t),
                }
            )
        return {
            "tasks": tasks,
            "parallel": agent.get("parallel", 1),
            "budget": {k: current.get(k) for k in ("budget_seconds_left", "budget_seconds_total", "iterations_left")},
            "usage": agent.get("usage"),
            "campaign": agent.get("campaign"),
        }

    def evidence(self, run_dir: Path, task: dict[str, Any]) -> dict[str, Any] | None:
        """A task's last iteration: its diff stat and the tails of its failing checks."""
        rel = (task.get("evidence") or [None])[-1]
        if not rel:
            return None
        ev = run_dir / rel
        out: dict[str, Any] = {"path": rel, "diffstat": read_tail(ev / "diff.txt", TAIL_BYTES)}
        try:
            verdict = json.loads((ev / "verdict.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            verdict = {}
        out["failing"] = [
            {"id": c["id"], "exit_code": c.get("exit_code"), "tail": self.check_tail(run_dir, c.get("step"))}
            for c in verdict.get("checks") or []
            if not c.get("ok")
        ]
        return out

    def check_tail(self, run_dir: Path, step: str | None) -> str:
        if not step:
            return ""
        text = "".join(read_tail(run_dir / "steps" / f"{step}.{s}", TAIL_BYTES) for s in ("stdout", "stderr"))
        return self.redact(text[-TAIL_BYTES:])

    # -- /api/v1/runs and /api/v1/runs/<run_id> ------------------------------------------

    def runs(self, limit: int | None) -> dict[str, Any]:
        names = self.results.names(self.ws)
        entries = history(self.ws, limit, read=self.results.get, names=names)
        return {
            "schema": SCHEMA,
            "generated_at": now_iso(),
            "runs": entries,
            "total": len(names),
            "stats": stats(self.ws, entries, self.results.get),
        }

    def run(self, run_id: str) -> dict[str, Any] | None:
        """One run: its result in RESULT_last.json's form (when finished), its ledger's
        steps, and for an agent MP its plan, tasks (with their last evidence) and usage."""
        run_dir = self.ws.runs_dir / run_id
        if "/" in run_id or run_id.startswith(".") or not run_dir.is_dir():
            return None
        result = self.results.get(run_dir)
        progress = Progress.load(run_dir)
        ledger = ledger_of(run_dir)
        doc: dict[str, Any] = {"schema": SCHEMA, "run_id": run_id, "finished": result is not None, "result": result}
        doc["ledger"] = {
            "mp_id": ledger.get("mp_id"),
            "status": ledger.get("status"),
            "steps": ledger.get("steps") or [],
        }
        doc["agent"] = None
        if progress is not None:
            d, r = progress.data, result or {}
            after = {p["id"]: p.get("after") or [] for p in d.get("plan") or []}
            doc["agent"] = {
                "plan": d.get("plan") or [],
                "tasks": [
                    {**t, "after": after.get(t["mt_id"], []), "evidence_last": self.evidence(run_dir, t)}
                    for t in r.get("micro_tasks") or d.get("micro_tasks") or []
                ],
                "usage": r.get("usage") or d.get("usage"),
                "certificate": r.get("certificate"),
            }
        return doc


def stats(ws: Workspace, entries: list[dict[str, Any]], read: Callable[[Path], Any]) -> dict[str, Any]:
    """Outcomes, durations and, per agent level, the tasks that reached it and how many it
    finished (a task finished by a level counts for that level only); tokens and cost."""
    outcomes: dict[str, int] = {}
    levels: dict[str, dict[str, int]] = {}
    tokens = {"input": 0, "output": 0, "cost_usd": 0.0}
    for e in entries:
        outcomes[e.get("status") or "?"] = outcomes.get(e.get("status") or "?", 0) + 1
        res = read(ws.runs_dir / e["run_id"]) or {}
        for t in res.get("micro_tasks") or []:
            names = t.get("level_names") or []
            for name in dict.fromkeys(names):
                row = levels.setdefault(name, {"reached": 0, "finished": 0})
                row["reached"] += 1
            if names and t.get("status") == "completed":
                levels[names[-1]]["finished"] += 1
        used = res.get("usage") or {}
        tokens["input"] += int(used.get("input") or 0)
        tokens["output"] += int(used.get("output") or 0)
        tokens["cost_usd"] = round(tokens["cost_usd"] + float(used.get("cost_usd") or 0), 6)
    done = sum(n for s, n in outcomes.items() if s == "COMPLETED")
    finished = sum(n for s, n in outcomes.items() if s not in ("OPEN", "?"))
    return {
        "outcomes": outcomes,
        "success_rate": round(done / finished, 3) if finished else None,
        "levels": {k: {**v, "rate": round(v["finished"] / v["reached"], 3)} for k, v in levels.items()},
        "usage": tokens,
    }


def actions(ws: Workspace, doc: dict[str, Any]) -> list[dict[str, str]]:
    """The exact commands that act on what the page shows (the dashboard itself is read-only)."""
    root = f" --root {ws.root}" if ws.root != Path.cwd() else ""
    out = []
    state, halt = doc["state"], doc.get("halt")
    if halt:
        out.append(
            {
                "what": f"lift the halt on {halt['mp_id']} (after fixing its cause)",
                "command": f"mp-engine approve{root}",
            }
        )
        out.append(
            {"what": "or from the orchestrator, an MP whose header has", "command": f"Approves: {halt['mp_id']}"}
        )
    if halt and halt.get("question"):
        mp = halt["mp_id"]
        out.insert(0, {"what": f"answer {mp}'s question", "command": f'mp-engine answer{root} {mp} "YOUR ANSWER"'})
    if state.get("run_id") and state.get("status") == "RUNNING":
        out.append({"what": f"cancel {state.get('current')}", "command": f"mp-engine cancel{root}"})
    return out


def ledger_of(run_dir: Path) -> dict[str, Any]:
    """A run's ledger with its journal applied, or {} when it cannot be read."""
    try:
        return journal.read(run_dir / RUN_LEDGER)
    except (OSError, ValueError):
        return {}


def read_last_sync(ws: Workspace) -> dict[str, Any]:
    at = read_last_sync_ok(ws.local_dir)
    return {"at": at, "age": age(at)}


def age(iso: Any) -> float | None:
    """Seconds since an ISO time, or None."""
    if not iso:
        return None
    try:
        return round(time.time() - parse_iso(str(iso)).timestamp(), 1)
    except ValueError:
        return None
