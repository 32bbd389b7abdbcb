"""Status: what the engine is doing, assembled from the workspace (never from memory).

`status_report` is the data of `mp-engine status --json`; `render_status` lays it out for a
person; `status_line` is the one line systemd shows (`STATUS=` in supervisor.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mp_engine import config_cache
from mp_engine.agent.progress import load_report, render_lines
from mp_engine.atomic import read_tail, sha256_file
from mp_engine.clock import parse_iso
from mp_engine.commands import terminal_safe
from mp_engine.daemon.health import ago, current_step, read_last_sync_ok, status_line
from mp_engine.errors import InvalidMPError
from mp_engine.exitcodes import ExitCode
from mp_engine.inbox.kinds import EntryKind, slot
from mp_engine.lock import WorkspaceLock, daemon_alive, daemon_owner
from mp_engine.pids import gone_here, hostname
from mp_engine.record.stateview import StateView, read_view
from mp_engine.workspace import Workspace

if TYPE_CHECKING:
    from mp_engine.config import Config

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
OUTPUT_TAIL_BYTES, OUTPUT_TAIL_LINES = 2048, 5  # of a running step's output, per stream
ANSI = {"red": 31, "green": 32, "yellow": 33, "cyan": 36, "white": 37}  # click.style's codes, without click
STATUS_COLOURS = {"ONLINE": "green", "RUNNING": "cyan", "ERROR": "red", "OFFLINE": "yellow"}


def run_result(ws: Workspace, run_id: str | None) -> dict[str, Any] | None:
    """A finished run's result.json (title, status, duration, certificate), if readable."""
    if not run_id:
        return None
    try:
        return json.loads((ws.runs_dir / run_id / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


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
    `config` as `Config`, or as its JSON (config_cache.py: what `status` reads)."""
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
        pending = report.get("pending")
        if pending and pending.get("approves") not in (halt.mp_id, halt.run_id):
            pending["held"] = f"waits: the engine is halted on {halt.mp_id} and this MP does not approve it"
    if state.run_id:  # a live agent run: MT, iteration, level, residual, budget (docs/AGENT.md)
        if (agent := load_report(ws.runs_dir / state.run_id)) is not None:
            report["agent"] = agent
    owner = WorkspaceLock(ws.lock_file, 1).owner()
    if owner:
        report["lock_holder"] = owner
    if cfg["git"]["enabled"]:
        # Lazy: pydantic, GitPython and the channel only when [git] is on (`status` starts fast).
        from mp_engine.config import GitConfig
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
    if last:
        res = run_result(ws, last.get("run_id")) or {}
        cert = (res.get("extra") or {}).get("certificate")
        report["last_mp"] = {
            **last,
            "title": res.get("title"),
            "duration": res.get("duration"),
            "certificate": cert.get("type") if isinstance(cert, dict) else None,
            "ago": ago(last.get("finished_at")),
        }
    if (err := last_error(ws.events_file)) is not None:
        report["last_error"] = err
    report["daemon"] = liveness(ws, state, step)
    if report["daemon"].get("summary"):
        report["summary"] = report["daemon"].pop("summary")
    if ws.stop_file.exists():
        report["stop_file"] = f"{ws.rel(ws.stop_file)} exists: agent MPs end BACKPRESSURE until it is removed"
    return report


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
    where = f" at step {step['number']}/{step['of']}" if step else ""
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
    from mp_engine import secretenv
    from mp_engine.config import FleetConfig
    from mp_engine.errors import ConfigError
    from mp_engine.fleet import require

    try:
        require()
    except ConfigError as e:
        return {"temporal": fleet["temporal"], "namespace": fleet.get("namespace"), "error": str(e)}
    from mp_engine.fleet.temporal import survey

    return survey(FleetConfig.model_validate(fleet), secretenv.environ())


def fleet_lines(report: dict[str, Any]) -> list[str]:
    lines = [f"  fleet:           Temporal {report['temporal']} (namespace {report['namespace']})"]
    if report.get("error"):
        return [*lines, f"    {report['error']}"]
    for queue, who in (report.get("queues") or {}).items():
        if who:
            lines.append(f"    queue {queue}: {len(who)} worker(s) polling: {', '.join(who)}")
        else:
            lines.append(
                f"    queue {queue}: no worker polling; its tasks wait until one starts "
                f"(`mp-engine worker --temporal {report['temporal']} --task-queue {queue}`)"
            )
    return lines


def render_status(report: dict[str, Any], *, color: bool = False) -> str:
    """The person's view; `color` (a TTY) colours the state, the halt and the last error."""

    def paint(text: str, fg: str, bold: bool = False) -> str:
        if not color:
            return text
        return f"\x1b[{ANSI[fg]}m" + (f"\x1b[1m{text}" if bold else text) + "\x1b[0m"

    s = report["state"]
    halted = bool(report.get("halt"))
    state_word = paint(s["status"], STATUS_COLOURS.get(s["status"], "white"), bold=True)
    lines = [
        f"mp-engine workspace {report['root']}",
        f"  status:          {state_word}" + (paint("  (halted)", "red", bold=True) if halted else ""),
    ]
    d = report.get("daemon") or {}
    if d.get("down"):
        lines[1] = f"  status:          {paint('OFFLINE', 'yellow', bold=True)} ({d['down']})"
        lines.append(f"  daemon:          {paint('DOWN', 'red', bold=True)}")
    elif d.get("alive"):
        lines.append(f"  daemon:          running (pid {d.get('pid', '?')}, started {d.get('started_at', '?')})")
        if d.get("config_changed"):
            lines.append(f"  config:          {paint(d['config_changed'], 'yellow')}")
    else:
        lines.append("  daemon:          not running")
    if report.get("summary"):
        lines.append(f"  doing:           {report['summary']}")
    current = s["current"]
    st = report.get("step") or {}
    if st:
        current += f", step {st['number']}/{st['of']} ({st['id']})"
        if "elapsed" in st:
            current += f", running {seconds(st['elapsed'])}, {seconds(st['time_left'])} left before its timeout"
    lines += [
        f"  current:         {current}",
        f"  last completed:  {s['last_completed'] or '-'}",
        f"  last updated:    {s['last_updated']}",
    ]
    if s.get("last_result"):
        r = report.get("last_mp") or s["last_result"]
        colour = "green" if r["status"] in ("ONLINE", "COMPLETED") else "red"
        extra = f", {seconds(r['duration'])}" if r.get("duration") is not None else ""
        extra += f", certificate {r['certificate']}" if r.get("certificate") else ""
        extra += f", {r['ago']}" if r.get("ago") else ""
        title = f" {r['title']}" if r.get("title") else ""
        lines.append(
            f"  last result:     {r['mp_id']}{title} {paint(r['status'], colour, bold=True)}{extra} "
            f"(run {r['run_id']}, SYSTEM/RESULT_last.md)"
        )
    if st.get("output_tail"):
        lines.append("  output:          " + "\n                   ".join(st["output_tail"]))
    if s.get("run_id"):
        lines.append(f"  open run:        {s['run_id']}")
    if report.get("agent") or s.get("waiting"):
        lines += render_lines(report.get("agent"), s.get("waiting"))
    if report.get("halt"):
        h = report["halt"]
        lines.append(f"  halted on:       {paint(h['mp_id'], 'red', bold=True)}: {h['reason']} (since {h['since']})")
        lines.append(f"  to continue:     send {h['lift_with'][0]}, or run {h['lift_with'][1]}")
    p = report.get("pending")
    if p:
        what = p.get("mp_id") or p["kind"]
        extra = f"  [{p['held']}]" if p.get("held") else (f"  [invalid: {p['invalid']}]" if p.get("invalid") else "")
        lines.append(f"  inbox:           {what} ({p['bytes']} bytes){extra}")
    else:
        lines.append("  inbox:           empty")
    if report.get("git"):
        g = report["git"]
        line = f"  git:             {g['remote']} {g['branch']}, {g.get('unpushed', '?')} unpushed commit(s)"
        from mp_engine.sync.push import refusal_notice  # loaded already: [git] is on

        if notice := refusal_notice(g.get("blocked")):
            line += f"  [{notice}]"
        elif g.get("blocked"):
            line += f"  [blocked: {g['blocked'].get('kind')} at {str(g['blocked'].get('remote'))[:12]}]"
        if g.get("error"):
            line += f"  [{g['error']}]"
        lines.append(line)
    if report.get("last_sync"):
        lines.append(f"  last sync:       {report['last_sync']['ago']}")
    if report.get("fleet"):
        lines += fleet_lines(report["fleet"])
    if report.get("lock_holder"):
        o = report["lock_holder"]
        lines.append(
            f"  lock held by:    pid {o.get('pid')} on {o.get('host')} for {o.get('purpose')} since {o.get('since')}"
        )
    if report.get("last_error"):
        e = report["last_error"]
        lines.append(f"  last error:      {paint(e['event'], 'red')} {ago(e['ts'])}: {e['message'][:300]}")
    if report.get("stop_file"):
        lines.append(f"  stop file:       {paint(report['stop_file'], 'yellow')}")
    if report.get("config_error"):
        lines.append(f"  config error:    {paint(report['config_error'], 'red')}")
    return "\n".join(lines)


def status(root: Path, as_json: bool, echo: Callable[[str], None], color: bool) -> ExitCode:
    ws = Workspace.at(root)
    ws.check()
    config, config_error = config_cache.read(ws.root, ws.local_dir)
    report = status_report(ws, config)
    if config_error:
        report["config_error"] = f"{config_error} (status shows the state with the default settings)"
    echo(json.dumps(report, indent=2) if as_json else render_status(terminal_safe(report), color=color))
    return ExitCode.OK
