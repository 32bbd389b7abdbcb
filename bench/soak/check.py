"""The invariants, from the files only (issue #45): every MP one final result on the host
and on the remote; no completed step or task run twice; no torn or missing result line; the
state file always whole; nothing left behind (processes carrying a run's marker, worktrees,
task branches, temp files, locks, queue entries); the event log and the archive within
their bounds; no halt the workload did not ask for.

Each function returns the violations it found, as sentences; none is the pass.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from bench.soak.faults import agent_calls, marked
from bench.soak.site import KEEP_RUNS, git_lines
from bench.soak.workload import AGENT, Kind

AGENT_KINDS = {k.value for k in AGENT}
EVENTS_MAX = 1048576  # [engine] events_max_bytes as the soak sets it
EVENTS_KEEP = 3
ARCHIVE_MAX = -(-KEEP_RUNS * 11 // 10) + 3  # past keep_runs + 10 % it prunes; the current and a halted run stay


def epoch(ts: str | None) -> float | None:
    if not ts:
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


# -- what the engine leaves behind, at idle ---------------------------------------------------


def leftovers(site: Any, agent_ids: set[str]) -> list[str]:
    """What an idle engine must not have: run processes, worktrees, task branches, stray
    mp/ branches, temp files, git locks, queue entries, claimed inbox entries."""
    out = processes(site)
    root, env = site.root, site.env
    trees = [line for line in git_lines(root, env, "worktree", "list", "--porcelain") if line.startswith("worktree ")]
    if len(trees) > 1:
        out.append(f"{len(trees) - 1} git worktree(s) besides the workspace: {trees[1:3]}")
    work = root / "SYSTEM/.engine/work"
    if work.is_dir() and any(work.iterdir()):
        out.append(f"SYSTEM/.engine/work holds {sorted(p.name for p in work.iterdir())[:5]}")
    for where, names in (
        ("host", git_lines(root, env, "for-each-ref", "--format=%(refname:short)", "refs/heads/")),
        ("remote", site.remote.branches("")),
    ):
        tasks = [b for b in names if b.startswith("mp-task/")]
        strays = [b for b in names if b.startswith("mp/") and b[3:] not in agent_ids]
        out += [f"{where}: task branch {b} after its run ended" for b in tasks]
        out += [f"{where}: branch {b} of no agent MP" for b in strays]
    for rel in files(root):
        name = rel.rsplit("/", 1)[-1]
        if ".mpe-tmp-" in name:
            out.append(f"temp file {rel}")
        elif rel.startswith(".git/") and name.endswith(".lock"):
            out.append(f"git lock {rel}")
        elif name.startswith(".mpe-claimed-"):
            out.append(f"claimed inbox entry {rel}")
    out += queue_left(root / "SYSTEM/.engine/queue")
    return out


def files(root: Path) -> list[str]:
    """Every file under `root`, relative, but git's object store (thousands of objects)."""
    out = []
    for top, dirs, names in os.walk(root):
        rel = os.path.relpath(top, root)
        if rel == ".git":
            dirs[:] = [d for d in dirs if d != "objects"]
        out += [name if rel == "." else f"{rel}/{name}" for name in names]
    return out


def queue_left(queue: Path) -> list[str]:
    """Entries still in the host-local queue (its index, and the files beside it)."""
    try:
        entries = json.loads((queue / "queue.json").read_text()).get("entries") or []
    except (OSError, ValueError):
        entries = []
    files = (
        [p.name for p in queue.iterdir() if p.name != "queue.json" and not p.name.startswith(".")]
        if queue.is_dir()
        else []
    )
    return [f"queued MP left: {e}" for e in entries[:5]] + [f"queue file left: {f}" for f in files[:5]]


def processes(site: Any) -> list[str]:
    """Processes carrying a run's marker (MP_RUN_DIR under this workspace: every step, check
    and agent call has it), or working in the workspace, that are not the daemon's own
    (its git, at work now)."""
    daemon = site.engine.pid
    ours = {os.getpid()}
    if daemon:
        try:
            ours |= {daemon, *(c.pid for c in psutil.Process(daemon).children(recursive=True))}
        except psutil.Error:
            pass
    out = []
    for p in psutil.process_iter(["pid", "cmdline", "cwd"]):
        info = p.info
        if info["pid"] in ours or (daemon and spawned_by(p, daemon)):  # one it started since the listing
            continue
        cmd = " ".join(info.get("cmdline") or [])[:120]
        m = marked(info["pid"], site.runs_prefix)
        if m is not None:
            what = m.get("MP_STEP") or m.get("MP_MT")
            out.append(f"process {info['pid']} ({cmd}) of {Path(m['MP_RUN_DIR']).name} {what}")
        elif (info.get("cwd") or "").startswith(str(site.root)):
            out.append(f"process {info['pid']} ({cmd}) in the workspace")
    return out


def spawned_by(p: psutil.Process, pid: int) -> bool:
    """Whether `pid` is among `p`'s ancestors now, from /proc/<pid>/stat (psutil's parents()
    reads each one's start time, and /proc/stat's btime failed to read once); a process
    gone meanwhile counts: it left nothing behind."""
    cur = p.pid
    try:
        for _ in range(64):
            cur = int(Path(f"/proc/{cur}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if cur == pid:
                return True
            if cur <= 1:
                return False
    except (OSError, ValueError, IndexError):
        return True
    return False


# -- results -------------------------------------------------------------------------------------


def results(sent: dict[str, Any], remote: dict, host: dict) -> dict[str, list[str]]:
    """Per MP: its result lines on the remote and on the host against what it expects.
    `lost`: a final result missing; `double`: more runs or lines than it may have."""
    out: dict[str, list[str]] = {"lost": [], "double": []}
    by_mp: dict[str, dict[str, list[dict]]] = {}
    for where, index in (("remote", remote), ("host", host)):
        for e in index.values():
            by_mp.setdefault(str(e.get("mp_id")), {}).setdefault(where, []).append(e)
    for mp_id, s in sent.items():
        for where in ("remote", "host"):
            lines = by_mp.get(mp_id, {}).get(where, [])
            runs = {e.get("run_id") for e in lines}
            if not lines:
                out["lost"].append(f"{mp_id} ({s.kind}) has no result on the {where}")
            elif len(runs) > 1:
                out["double"].append(f"{mp_id} ({s.kind}) ran {len(runs)} times on the {where}: {sorted(runs)}")
            elif len(lines) > max(1, len(s.expects)):
                out["double"].append(f"{mp_id} ({s.kind}) has {len(lines)} result lines on the {where}")
            elif not s.unexpected and len(lines) < len(s.expects):
                out["lost"].append(
                    f"{mp_id} ({s.kind}) has {len(lines)} of its {len(s.expects)} results on the {where}"
                )
    return out


def missing_lines(runs: dict[str, Any], host_index: dict) -> list[str]:
    """Every archived run with a result has its line in results.jsonl."""
    indexed = {str(e.get("run_id")) for e in host_index.values()}
    return [f"run {r} has a result but no line in results.jsonl" for r in runs if r not in indexed]


def explained(sent: dict[str, Any], runs: dict[str, Any], faults: list[Any]) -> tuple[list[str], list[str]]:
    """The results that were not the expected ones: (explained by a fault, not explained).
    A full disk explains an ERROR `disk_full` of a run it overlapped; a halt it explains
    explains a SUPERSEDED MP that waited behind it."""
    windows = [(f.start, f.end) for f in faults if f.kind == "disk_full" and f.applied]
    ok: list[str] = []
    rest: list[tuple[Any, str]] = []
    halted_at: list[float] = []
    for s in sent.values():
        for what in s.unexpected:
            run = runs.get(str(s.lines[-1].get("run_id"))) if s.lines else None
            span = (epoch(run.started), epoch(run.finished)) if run else (s.sent_at, None)
            if what == "ERROR disk_full" and any(overlaps(span, w) for w in windows):
                ok.append(f"{s.mp_id}: {what} (the disk was full)")
                halted_at.append(s.seen_at[-1] if s.seen_at else 0.0)
            else:
                rest.append((s, what))
    bad = []
    for s, what in rest:
        seen = s.seen_at[-1] if s.seen_at else float("inf")
        if what == "SUPERSEDED" and any(s.sent_at <= t <= seen for t in halted_at):
            ok.append(f"{s.mp_id}: SUPERSEDED behind a halt the full disk caused")
        else:
            bad.append(f"{s.mp_id} ({kind_of(s)}) ended {what}, not {'/'.join(s.expects)}")
    return ok, bad


def overlaps(span: tuple[float | None, float | None], window: tuple[float, float]) -> bool:
    a, b = span
    if a is None:
        return False
    return a <= window[1] and (b is None or b >= window[0])


# -- nothing ran twice ------------------------------------------------------------------------------


def steps_twice(steps_log: Path, runs: dict[str, Any]) -> list[str]:
    """A command step or check ran at most once, plus once per recovery that re-ran it
    (`[recovery] interrupted_step = "rerun"`: the step a kill interrupted runs again)."""
    try:
        lines = steps_log.read_text().splitlines()
    except FileNotFoundError:
        return []
    counts = Counter(tuple(line.rsplit(" ", 1)) for line in lines if " " in line)
    out = []
    for (run_dir, step), n in counts.items():
        run = runs.get(Path(run_dir).name)
        allowed = 1 + (run.retried.get(step, 0) if run else 0)
        if n > allowed:
            out.append(f"{Path(run_dir).name} {step} ran {n} times (allowed {allowed})")
    return out


def iterations_twice(calls_log: Path, runs: dict[str, Any], faults: list[Any]) -> list[str]:
    """An agent iteration is called once, plus once per recovery that re-ran it, plus once
    after a usage limit (the same iteration goes on) or a kill of its agent."""
    calls = agent_calls(calls_log)
    counts = Counter((c["run"], c["mt"], c["iteration"]) for c in calls)
    limited = Counter((c["run"], c["mt"], c["iteration"]) for c in calls if c.get("limited"))
    kills = Counter(f.note for f in faults if f.kind == "agent_kill" and f.applied)
    out = []
    for (run_id, mt, it), n in counts.items():
        run = runs.get(run_id)
        step = f"{mt}_iter-{it:03d}"
        allowed = 1 + (run.retried.get(step, 0) if run else 0) + limited[(run_id, mt, it)] + kills[run_id]
        if n > allowed:
            out.append(f"{run_id} {step}: the agent was called {n} times (allowed {allowed})")
    return out


def tasks_twice(remote: Any) -> list[str]:
    """One commit per micro-task: among the commits the remote's branches reach, each
    `MP-x.y MT-00n:` subject belongs to one commit."""
    out = []
    seen: dict[str, set[str]] = {}
    for line in (remote.git("log", "--format=%H %s", "--branches") or "").splitlines():
        commit, _, subject = line.partition(" ")
        task = subject.split(":", 1)[0]
        if " MT-" in task and task.startswith("MP-"):
            seen.setdefault(task, set()).add(commit)
    for task, commits in sorted(seen.items()):
        if len(commits) > 1:
            out.append(f"{task} committed {len(commits)} times: {sorted(c[:12] for c in commits)}")
    return out


# -- bounds ----------------------------------------------------------------------------------------------


def bounds(site: Any) -> list[str]:
    out = []
    files = site.host.events.files()
    if len(files) > EVENTS_KEEP + 1:
        out.append(f"{len(files)} event log files (at most {EVENTS_KEEP + 1})")
    out += [
        f"{p.name} is {p.stat().st_size} bytes (cap {EVENTS_MAX})"
        for p in files
        if p.stat().st_size > EVENTS_MAX + 65536
    ]
    host_runs = [p for p in (site.root / "SYSTEM/runs").iterdir() if p.is_dir()]
    if len(host_runs) > ARCHIVE_MAX:
        out.append(f"{len(host_runs)} run archives on the host (keep_runs {KEEP_RUNS})")
    remote_runs = site.remote.runs()
    if len(remote_runs) > ARCHIVE_MAX:
        out.append(f"{len(remote_runs)} run archives on the remote (keep_runs {KEEP_RUNS})")
    return out


def halts(events: Any, sent: dict[str, Any]) -> list[str]:
    """Every `halted` event is for an MP whose result was an ERROR the run saw."""
    errors = {s.mp_id for s in sent.values() if "ERROR" in s.statuses}
    return [
        f"halted on {e.get('mp')} without an ERROR result for it"
        for e in events.kept
        if e.get("event") == "halted" and e.get("mp") not in errors
    ]


def kind_of(s: Any) -> str:
    return s.kind.value if isinstance(s.kind, Kind) else str(s.kind)
