"""What `mp-engine status --json` reports, assembled from the workspace (never from memory):
the state, the running step and its last output, the last MP, the last error, the daemon's
liveness, the fleet. commands/status.py lays it out for a person; the dashboard serves it."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mp_engine.agent.progress import load_report
from mp_engine.core.atomic import read_tail, sha256_file
from mp_engine.core.clock import parse_iso
from mp_engine.core.errors import InvalidMPError
from mp_engine.core.lock import WorkspaceLock, daemon_alive, daemon_owner
from mp_engine.core.pids import gone_here, hostname
from mp_engine.core.workspace import Workspace
from mp_engine.daemon.health import ago, current_step, read_last_sync_ok, status_line
from mp_engine.forge.watch import WatchList
from mp_engine.inbox.kinds import EntryKind, slot
from mp_engine.record.digest import read_result
from mp_engine.record.spend import report as spend_report
from mp_engine.record.stateview import StateView, read_view
from mp_engine.views.loopstate import loop_state

if TYPE_CHECKING:
    from mp_engine.config.load import Config

# Events whose newest one is "the last error" in `status`.
ERROR_EVENTS = {
    "mp_failed": "summary",
    "tick_failed": "error",
    "sync_failed": "error",
    "sync_unreachable": "error",
    "sync_blocked": "summary",
    "sync_conflict": "paths",
    "engine_stalled": "detail",
    "watcher_fallback": "error",
}


TAIL_BYTES = 256 * 1024  # how much of the event log `status` reads for the last error


OUTPUT_TAIL_BYTES = 2048  # of a running step's output, per stream


OUTPUT_TAIL_LINES = 5


def run_result(ws: Workspace, run_id: str | None) -> dict[str, Any] | None:
    """A finished run's result.json (title, status, duration, certificate), if readable."""
    return read_result(ws.runs_dir / run_id) if run_id else None


def last_error(events_file: Path) -> dict[str, Any] | None:
    """The newest error-like event in the tail of the event log, unless a halt was
    approved after it."""
    try:
        with open(events_file, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - TAIL_BYTES))
            tail = f.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for raw in reversed(tail):
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        if rec.get("event") == "approved":
            return None  # what came before was approved: not "the last error" any more
        key = ERROR_EVENTS.get(rec.get("event"))
        if key:
            return {"ts": rec.get("ts"), "event": rec["event"], "message": str(rec.get(key, "")), "mp": rec.get("mp")}
    return None


def status_report(ws: Workspace, config: Config | dict[str, Any]) -> dict[str, Any]:
    """State, the pending MP, the halt and how to lift it, and who holds the lock.
    `config` as `Config`, or as its JSON (config/cache.py: what `status` reads).
    Long because it is the report's fields, each read from one file, in the order `status`
    prints them."""
    cfg = config if isinstance(config, dict) else config.model_dump(mode="json")
    state = read_view(ws.state_file)
    report: dict[str, Any] = {"root": str(ws.root), "state": state.to_json()}
    entry = slot(ws.inbox_file)
    if entry is not None:
        kind, size = entry
        pending: dict[str, Any] = {"path": ws.rel(ws.inbox_file), "kind": kind.value, "bytes": size}
        if kind is EntryKind.FILE and size <= cfg["engine"]["max_mp_bytes"]:
            from mp_engine.inbox.mpfile import parse_head  # lazy: only when an MP waits (bench figure 8)

            try:
                # The header only: status never reads an MP's body (`mp-engine check` does).
                mp_id, title, headers = parse_head(ws.inbox_file.read_bytes(), max_bytes=cfg["engine"]["max_mp_bytes"])
                pending.update(mp_id=mp_id, title=title, approves=headers.get("Approves"))
            except (InvalidMPError, OSError) as e:
                pending["invalid"] = str(e)
        report["pending"] = pending
    if state.halt is not None:
        halt = state.halt
        report["halt"] = {
            **halt.model_dump(),
            "lift_with": [f"an MP whose header has `Approves: {halt.mp_id}`", "`mp-engine approve` on this host"],
        }
        asked = (run_result(ws, halt.run_id) or {}).get("answerable")
        if asked and asked.get("kind") == "plan_review":  # a plan waits for approval (issue #42)
            report["halt"]["question"] = asked
            report["halt"]["answer_with"] = f"`mp-engine answer {halt.mp_id} approve` (or `cancel`, or what to change)"
        waiting_mp = report.get("pending")
        if waiting_mp and waiting_mp.get("approves") not in (halt.mp_id, halt.run_id):
            waiting_mp["held"] = f"waits: the engine is halted on {halt.mp_id} and this MP does not approve it"
    if state.run_id:  # a live agent run: MT, iteration, level, residual, budget (docs/AGENT.md)
        if (agent := load_report(ws.runs_dir / state.run_id)) is not None:
            report["agent"] = agent
    owner = WorkspaceLock(ws.lock_file, 1).owner()
    if owner:
        report["lock_holder"] = owner
    if cfg["git"]["enabled"]:
        # Lazy: pydantic, GitPython and the channel only when [git] is on (`status` starts fast).
        from mp_engine.config.sections import GitConfig
        from mp_engine.sync.channel import GitChannel

        report["git"] = GitChannel(ws, GitConfig.model_validate(cfg["git"])).report()
        at = read_last_sync_ok(ws.local_dir)
        report["last_sync"] = {"at": at, "ago": ago(at) if at else "never (since this engine started)"}
    if (cfg.get("fleet") or {}).get("temporal"):
        report["fleet"] = fleet_survey(cfg["fleet"])
    report["summary"] = status_line(ws, state)
    step = current_step(ws, state.run_id) if state.run_id and "agent" not in report else None
    if step:
        report["step"] = running_step(ws, cfg["execution"], str(state.run_id), step)
    last = state.last_result
    res = (run_result(ws, last.get("run_id")) or {}) if last else {}
    report["loop"] = loop_state(state, res)  # Loopr's state names and next_reset_at (issue #44)
    if last:
        cert = res.get("certificate")
        d = res.get("diagnosis") or {}
        report["last_mp"] = {
            **last,
            "title": res.get("title"),
            "why": (d.get("text") if res.get("status") == "REFUSED" else d.get("summary")) or None,
            "duration": res.get("duration"),
            "certificate": cert.get("type") if isinstance(cert, dict) else None,
            "ago": ago(last.get("finished_at")),
            **({"pull_request": res["pull_request"]} if res.get("pull_request") else {}),
        }
    if review := for_review(ws, cfg):
        report["for_review"] = review
    if (err := last_error(ws.events_file)) is not None:
        report["last_error"] = err
    report["daemon"] = liveness(ws, state, step)
    if report["daemon"].get("summary"):
        report["summary"] = report["daemon"].pop("summary")
    if (budget := spend_report(ws.local_dir, cfg.get("agent") or {})) is not None:  # issue #42
        report["budget"] = budget
    if ws.stop_file.exists():
        report["stop_file"] = f"{ws.rel(ws.stop_file)} exists: agent MPs end BACKPRESSURE until it is removed"
    return report


def for_review(ws: Workspace, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """The pull requests waiting for review (forge/watch.py), each with its rounds' bound."""
    repos = cfg.get("repos") or {}
    return [
        {
            "repo": w.repo,
            "number": w.number,
            "url": w.url,
            "mp_id": w.mp_id,
            "run_id": w.run_id,
            "ci": "passed" if w.green else "not green",
            "review_rounds": w.review_rounds,
            "review_rounds_max": (repos.get(w.repo) or {}).get("review_rounds"),
            "looks_every": (repos.get(w.repo) or {}).get("review_poll"),
        }
        for w in WatchList.at(ws.local_dir).all()
    ]


def running_step(ws: Workspace, execution: dict[str, Any], run_id: str, step: dict[str, Any]) -> dict[str, Any]:
    """The step a run is on, with (while it runs) how long it has run, the time left
    before its timeout (the step's, or the MP's when that comes first), and its last
    lines of output."""
    if not step.get("started_at"):
        return step
    now = datetime.now(UTC)
    elapsed = (now - parse_iso(step["started_at"])).total_seconds()
    left = step.get("step_timeout", execution["step_timeout"]) - elapsed
    if step.get("run_started_at"):
        mp_used = (now - parse_iso(step["run_started_at"])).total_seconds()
        left = min(left, step.get("mp_timeout", execution["mp_timeout"]) - mp_used)
    tail = []
    for stream in ("stdout", "stderr"):
        path = ws.runs_dir / run_id / "steps" / f"{step['id']}.{stream}"
        text = read_tail(path, OUTPUT_TAIL_BYTES).rstrip("\n")
        tail += [f"{stream}: {line}" for line in text.splitlines()[-OUTPUT_TAIL_LINES:]]
    return {**step, "elapsed": round(elapsed, 1), "time_left": round(max(0.0, left), 1), "output_tail": tail}


def liveness(ws: Workspace, state: StateView, step: dict[str, Any] | None) -> dict[str, Any]:
    """Whether a daemon serves the workspace now: the holder of `daemon.lock` (its pid and
    start), else what the state last recorded. `down` says what a person must know when
    the state still claims a daemon that is gone; `summary` replaces "doing" when none runs.
    `step`: the run's current step, if any (`current_step`)."""
    alive = daemon_alive(ws.daemon_lock_file)
    if alive:
        owner = daemon_owner(ws.daemon_lock_file) or {}
        started_with = owner.pop("config_sha256", None)
        if started_with and started_with != sha256_file(ws.config_file):
            owner["config_changed"] = (
                f"{ws.rel(ws.config_file)} changed since the daemon started ({owner.get('started_at')}); "
                "it runs with the old settings: restart it to apply (`systemctl restart mp-engine`, or stop and "
                "start `mp-engine run`)"
            )
        return {"alive": True, **owner}
    recorded = getattr(state, "daemon", None) or {}
    fields = {"last_pid": recorded.get("pid"), "host": recorded.get("host"), "started_at": recorded.get("started_at")}
    if recorded and not gone_here(recorded):
        # No holder of daemon.lock, yet the engine the state names is not gone: `once`
        # (which takes no daemon.lock), one on another host, or no probe on this system.
        return {"alive": recorded.get("host") == hostname() or alive is None, **fields}
    out: dict[str, Any] = {"alive": False, **(fields if recorded else {})}
    where = f" at {step['label']}" if step else ""
    interrupted = f"{state.current} was interrupted{where} and resumes when the daemon starts" if state.run_id else ""
    if recorded and state.status != "OFFLINE":  # it never recorded its stop: crashed or killed
        out["down"] = out["summary"] = (
            f"not running (last seen {state.last_updated}; the state file still says {state.status}): "
            f"{interrupted or 'it crashed or was killed'}; start it (`mp-engine run` or the service)"
        )
    elif interrupted:  # stopped cleanly in the middle of an MP
        out["summary"] = f"not running; {interrupted}"
    elif state.halt is not None:  # stopped cleanly while halted
        out["summary"] = f"not running; {status_line(ws, state)}"
    else:
        out["summary"] = "not running"
    return out


def seconds(value: float | None) -> str:
    """A duration for a person: "4.2 s", "3 min 5 s", "2 h 10 min" ("?" when unknown)."""
    if value is None:
        return "?"
    value = float(value)
    if value < 60:
        return f"{value:.1f} s"
    minutes, sec = divmod(int(value), 60)
    return f"{minutes} min {sec} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def fleet_survey(fleet: dict[str, Any]) -> dict[str, Any]:
    """Temporal and the workers polling each queue (`[fleet]`, docs/FLEET.md); temporalio
    is imported only here."""
    from mp_engine.config.fleet import FleetConfig
    from mp_engine.core import secretenv
    from mp_engine.core.errors import ConfigError
    from mp_engine.fleet import require

    try:
        require()
    except ConfigError as e:
        return {"temporal": fleet["temporal"], "namespace": fleet.get("namespace"), "error": str(e)}
    from mp_engine.fleet.temporal import survey

    return survey(FleetConfig.model_validate(fleet), secretenv.environ())
