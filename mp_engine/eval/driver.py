"""The eval's engine: every (configuration, task) pair not yet judged, N at once, each carried
through its phases (phases.py decides, this acts): the environment's probe, the workspace,
`mp-engine once`, the judgement, one line in results.jsonl. A stop (the first signal) starts
nothing more and lets each `once` checkpoint; the same command later goes on from the facts.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from mp_engine.core.atomic import atomic_write, atomic_write_json
from mp_engine.core.clock import now_iso
from mp_engine.core.exitcodes import ExitCode
from mp_engine.eval import checkout, taskspace
from mp_engine.eval.child import Children, clear_orphan, run_once, warm
from mp_engine.eval.judge import Judgement, judge, probe
from mp_engine.eval.layout import EvalDir
from mp_engine.eval.measure import measure
from mp_engine.eval.phases import Facts, Phase, next_phase, pairs, pending
from mp_engine.eval.results import Results, Verdict
from mp_engine.eval.tasks import Task, TaskSet
from mp_engine.eval.testcmd import Interrupted, Shell

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class EvalScope:
    """What every part of one eval needs, built once (commands/eval.py)."""

    out: EvalDir
    tasks: TaskSet
    configs: dict[str, Path]  # name -> its copy in the eval directory
    parallel: int
    say: Callable[[str], None]
    judge_timeout: float = 1800.0
    hide: tuple[Path, ...] = ()  # hidden from every agent besides the eval directory (the task set's source)
    stop: threading.Event = field(default_factory=threading.Event)
    stop_now: threading.Event = field(default_factory=threading.Event)


class Eval:
    def __init__(self, scope: EvalScope):
        self.scope = scope
        self.out = scope.out
        self.results = Results(scope.out.results)
        self.children = Children()
        self.by_id = {t.instance_id: t for t in scope.tasks.tasks}
        self._task_locks: dict[str, threading.Lock] = {}
        self._locks = threading.Lock()
        self._start = time.monotonic()

    def run(self) -> ExitCode:
        """Every pair not judged yet: OK when all are, INTERRUPTED when stopped first,
        MP_ERROR when a pair failed (it is said why; the same command tries it again)."""
        todo = pending(pairs(list(self.scope.configs), list(self.by_id)), self.results.judged)
        self.scope.say(f"{len(todo)} of {len(self.by_id) * len(self.scope.configs)} run(s) to go")
        if todo:
            warm()
        with ThreadPoolExecutor(max_workers=self.scope.parallel, thread_name_prefix="eval") as pool:
            futures = [pool.submit(self.carry, config, iid) for config, iid in todo]
            for f in futures:
                f.result()
        done = all(self.results.judged(c, t) for c, t in pairs(list(self.scope.configs), list(self.by_id)))
        if done:
            return ExitCode.OK
        return ExitCode.INTERRUPTED if self.scope.stop.is_set() else ExitCode.MP_ERROR

    def checkpoint(self) -> int:
        """The first signal: start nothing more, and let each running `once` checkpoint."""
        self.scope.stop.set()
        return self.children.checkpoint_all()

    # -- one pair through its phases ------------------------------------------------

    def carry(self, config: str, iid: str) -> None:
        """One pair until it is judged or the eval stops. A failure of the environment ends it
        as env_error; any other failure leaves it pending (logged, said) for the next run of
        the command: the other pairs go on either way."""
        task = self.by_id[iid]
        while True:
            phase = next_phase(self.facts(config, task))
            if phase in (Phase.DONE, Phase.STOP):
                return
            try:
                self.act(phase, config, task)
            except Interrupted:
                return  # stopped now: the phase is done again on the next start
            except checkout.CheckoutError as e:
                self.record(config, task, Judgement(Verdict.ENV_ERROR, str(e)), run={}, times={})
            except Exception as e:  # noqa: BLE001 - one pair's failure must not end the eval
                log.exception("eval_pair_failed", config=config, task=iid)
                self.scope.say(f"{self.clock()} {config} {iid}: failed ({type(e).__name__}: {e}); not judged")
                return  # left pending: the same command tries it again

    def facts(self, config: str, task: Task) -> Facts:
        iid = task.instance_id
        probed = self.read_probe(iid)
        attempts = self.attempts(config, iid)
        return Facts(
            judged=self.results.judged(config, iid),
            stopping=self.scope.stop.is_set(),
            probed=probed is not None,
            probe_ok=probed is not None and probed.verdict == Verdict.RESOLVED,
            has_result=taskspace.run_result(self.out.workspace(config, iid)) is not None,
            failed_runs=sum(1 for a in attempts if a.get("ended") and not a.get("stopped")),
            prepared=self.out.prepared(config, iid).exists(),
        )

    def act(self, phase: Phase, config: str, task: Task) -> None:
        {
            Phase.PROBE: lambda: self.probe(task),
            Phase.SKIP_ENV: lambda: self.skip_env(config, task),
            Phase.PREPARE: lambda: self.prepare(config, task),
            Phase.RUN: lambda: self.run_agent(config, task),
            Phase.JUDGE: lambda: self.judge(config, task),
            Phase.GIVE_UP: lambda: self.give_up(config, task),
        }[phase]()

    # -- the phases -----------------------------------------------------------------

    def source(self, task: Task) -> tuple[Path, str]:
        """The task's mirror and its base commit's full id (CheckoutError when unavailable)."""
        path = self.out.mirror(task.repo)
        return path, checkout.mirror(task.url, path, task.base_commit)

    def probe(self, task: Task) -> None:
        iid = task.instance_id
        with self._locks:
            lock = self._task_locks.setdefault(iid, threading.Lock())
        with lock:  # once per task, whichever configuration comes first
            if self.read_probe(iid) is not None:
                return
            self.scope.say(f"{self.clock()} {iid}: probing the environment")
            shell = self.shell(self.out.probe_dir(iid) / "copy", self.out.probe_dir(iid) / "logs")
            try:
                mirror, base = self.source(task)
            except checkout.CheckoutError as e:
                verdict = Judgement(Verdict.ENV_ERROR, f"the repository cannot be had: {e}")
            else:
                verdict = probe(task, mirror, base, shell.cwd, shell)
            self.out.probe(iid).parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.out.probe(iid), verdict.to_json())
            if verdict.verdict != Verdict.RESOLVED:
                self.scope.say(f"{self.clock()} {iid}: env_error: {verdict.why}")

    def read_probe(self, iid: str) -> Judgement | None:
        try:
            return Judgement.from_json(json.loads(self.out.probe(iid).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError):
            return None

    def skip_env(self, config: str, task: Task) -> None:
        probed = self.read_probe(task.instance_id)
        why = probed.why if probed else "the environment's probe failed"
        self.record(config, task, Judgement(Verdict.ENV_ERROR, why), run={}, times={})

    def prepare(self, config: str, task: Task) -> None:
        start = time.monotonic()
        mirror, base = self.source(task)
        run_dir = self.out.run_dir(config, task.instance_id)
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(run_dir / "once.json", "[]")  # a fresh workspace: no attempt yet
        info = taskspace.prepare(
            task,
            mirror,
            base,
            self.scope.configs[config],
            self.out.workspace(config, task.instance_id),
            self.marker(config, task),
        )
        info["seconds"] = round(time.monotonic() - start, 3)
        atomic_write_json(self.marker(config, task), info)

    def marker(self, config: str, task: Task) -> Path:
        return self.out.prepared(config, task.instance_id)

    def attempts(self, config: str, iid: str) -> list[dict[str, Any]]:
        try:
            data = json.loads((self.out.run_dir(config, iid) / "once.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return data if isinstance(data, list) else []

    def run_agent(self, config: str, task: Task) -> None:
        """`mp-engine once` on the workspace. Each attempt is written down before it starts:
        one that never ended (the eval was killed) marks the run as resumed."""
        iid = task.instance_id
        ws, path = self.out.workspace(config, iid), self.out.run_dir(config, iid) / "once.json"
        earlier = self.attempts(config, iid)
        orphan = clear_orphan(ws)
        self.scope.say(f"{self.clock()} {config} {iid}: {'resumed' if earlier else 'started'}")
        attempt: dict[str, Any] = {"started_at": now_iso(), "orphan": orphan}
        atomic_write_json(path, [*earlier, attempt])
        hide = [*self.scope.hide, *self.out.hidden(config, iid, list(self.scope.configs))]
        env = taskspace.overrides(self.scope.configs[config], hide)
        ran = run_once(ws, env, self.out.logs(config, iid), self.children, self.scope.stop_now)
        attempt.update(ended=True, exit_code=ran.exit_code, wall=ran.wall, summary=ran.summary)
        attempt["stopped"] = self.scope.stop.is_set() or ran.exit_code == ExitCode.INTERRUPTED
        atomic_write_json(path, [*earlier, attempt])

    def judge(self, config: str, task: Task) -> None:
        iid = task.instance_id
        ws = self.out.workspace(config, iid)
        found = taskspace.run_result(ws)
        assert found is not None  # the phase says so
        run, result = found
        figures = measure(run, result)
        prepared = json.loads(self.marker(config, task).read_text(encoding="utf-8"))
        patch = checkout.work_patch(ws, prepared["base"], figures["work_commit"])
        atomic_write(self.out.run_dir(config, iid) / "agent.patch", patch)
        mirror, base = self.source(task)
        shell = self.shell(self.out.judge_dir(config, iid), self.out.logs(config, iid) / "judge")
        verdict = judge(task, mirror, base, patch, shell.cwd, shell)
        attempts = self.attempts(config, iid)
        times = {"prepare": prepared.get("seconds", 0.0), "run": round(sum(a.get("wall") or 0 for a in attempts), 3)}
        figures["resumed"] = len(attempts) > 1  # its time then misses what the killed attempt took
        figures["archive"] = str(run.relative_to(self.out.root))
        self.record(config, task, verdict, run=figures, times=times)

    def give_up(self, config: str, task: Task) -> None:
        last = (self.attempts(config, task.instance_id) or [{}])[-1]
        why = f"`mp-engine once` ended without a result ({last.get('summary') or 'no output'}): see its log"
        self.record(config, task, Judgement(Verdict.ERROR, why), run={}, times={})

    # -- what they share --------------------------------------------------------------

    def record(
        self, config: str, task: Task, verdict: Judgement, *, run: dict[str, Any], times: dict[str, Any]
    ) -> None:
        probed = self.read_probe(task.instance_id)
        times = {**times, "judge": round(verdict.duration, 3), "probe": round(probed.duration, 3) if probed else 0.0}
        if run:
            inside = run["agent_seconds"] + run["check_seconds"]
            times["engine"] = round(max(0.0, times["run"] - inside), 3)
        row = {
            "config": config,
            "instance_id": task.instance_id,
            "repo": task.repo,
            **verdict.to_json(),
            **run,
            "time": times,
            "judged_at": now_iso(),
        }
        row.pop("duration", None)
        self.results.add(row)
        detail = f" ({row.get('certificate')}, {row.get('iterations', 0)} iteration(s))" if run else ""
        self.scope.say(f"{self.clock()} {config} {task.instance_id}: {verdict.verdict.value}{detail}")

    def shell(self, cwd: Path, logs: Path) -> Shell:
        return Shell(cwd, logs, timeout=self.scope.judge_timeout, stop_now=self.scope.stop_now)

    def clock(self) -> str:
        s = int(time.monotonic() - self._start)
        return f"[{s // 60:02d}:{s % 60:02d}]"
