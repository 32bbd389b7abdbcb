"""23. `mp-engine eval` (issue #43): a 16-task set whose agent takes 1 s per call (the
scripted model's time), run through the real command in this process: serially, then with
`--parallel 4`, each in a fresh eval directory, the fork server warmed first.

Each task is the same tiny shell repository with a real bug (`value.sh` prints 1, its hidden
test wants 2); the agent (a bash script) reads its prompt, sleeps 1 s, fixes the file and
claims completion, so every task is resolved in one iteration.

Figures: the engine's own overhead per task (`once`'s wall time outside the agent call and
the checks, from the report) as a share of the task's time in `once`, target at most 5 %;
and the wall time of the whole eval at `--parallel 4` against the ideal, a quarter of the
serial eval measured in the same run, target at most 1.15x. Reported beside: the time per
task in `once`, and the harness's own time per task (the probe, the workspace, the judging).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.common import Row, Stat, engine_env, executable, info_row

TASKS = 16
SLEEP = 1.0
PARALLEL = 4
SHARE_TARGET = 0.05
PARALLEL_TARGET = 1.15

AGENT = r"""#!/bin/bash
# The scripted model's second: find the nonce, sleep, fix the bug, claim.
while IFS= read -r line; do
  case $line in "NONCE: "*) nonce=${line#NONCE: }; break;; esac
done < "$1"
sleep SLEEP
echo 'echo 2' > value.sh
printf '<mt_complete nonce="%s">value.sh prints 2</mt_complete>\n' "$nonce"
printf -- '---LOOPR_STATUS---\nNONCE: %s\nSTATUS: COMPLETE\nEXIT_SIGNAL: true\nWORK_TYPE: code\n' "$nonce"
printf 'FILES_MODIFIED: 1\nERRORS: 0\nSUMMARY: fixed value.sh\n---END_LOOPR_STATUS---\n'
""".replace("SLEEP", str(SLEEP))


def task_set(base: Path, env: dict[str, str]) -> Path:
    """16 tasks on one repository: value.sh prints 1; the hidden test wants 2."""
    repo = base / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "value.sh").write_text("echo 1\n")
    (repo / "tests" / "ok.sh").write_text("test -f value.sh\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, env=env, capture_output=True, text=True).stdout.strip()
    test_patch = (
        "diff --git a/tests/two.sh b/tests/two.sh\nnew file mode 100644\n--- /dev/null\n+++ b/tests/two.sh\n"
        '@@ -0,0 +1 @@\n+test "$(bash value.sh)" = 2\n'
    )
    rows = [{"repo": "value", "url": str(repo), "test": "bash {test}"}]
    for i in range(1, TASKS + 1):
        rows.append(
            {
                "instance_id": f"value-{i:02d}",
                "repo": "value",
                "base_commit": sha,
                "problem_statement": "value.sh must print 2.",
                "test_patch": test_patch,
                "FAIL_TO_PASS": ["tests/two.sh"],
                "PASS_TO_PASS": ["tests/ok.sh"],
            }
        )
    path = base / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """This process's environment as the eval's children should see it, for the run."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def one_eval(tasks: Path, config: Path, out: Path, parallel: int) -> tuple[float, dict]:
    from mp_engine.eval.command import EvalArgs, eval_

    t0 = time.perf_counter()
    code = eval_(EvalArgs(root=out.parent, tasks=tasks, configs=(config,), parallel=parallel, out=out), lambda _: None)
    wall = time.perf_counter() - t0
    if code != 0:
        raise RuntimeError(f"the eval exited {code}: see {out}")
    return wall, json.loads((out / "report.json").read_text())


def measure(reps: int) -> list[Row]:
    from mp_engine.eval.child import warm

    serial: list[float] = []
    wide: list[float] = []
    shares: list[float] = []
    engine: list[float] = []
    ran: list[float] = []
    harness: list[float] = []
    with tempfile.TemporaryDirectory(prefix="mpe-bench-eval-") as tmp:
        base = Path(tmp)
        env = engine_env(base)
        tasks = task_set(base, env)
        agent = executable(base / "agent.sh", AGENT)
        config = base / "fast.toml"
        config.write_text(
            f'[agent]\nmax_iterations = 2\n\n[[agent.levels]]\nname = "sleepy"\nargv = ["{agent}", "{{prompt_file}}"]\n'
        )
        with environment(env):
            warm()
            for rep in range(reps):
                w1, doc = one_eval(tasks, config, base / f"serial-{rep}", 1)
                w4, _ = one_eval(tasks, config, base / f"wide-{rep}", PARALLEL)
                serial.append(w1)
                wide.append(w4)
                rows = [
                    json.loads(line) for line in (base / f"serial-{rep}" / "results.jsonl").read_text().splitlines()
                ]
                if doc["configs"][0]["resolved"] != TASKS:
                    raise RuntimeError(f"not every task was resolved: {doc['configs'][0]}")
                for r in rows:
                    t = r["time"]
                    engine.append(t["engine"] * 1000)
                    ran.append(t["run"] * 1000)
                    shares.append(t["engine"] / t["run"])
                    harness.append((t["probe"] + t["prepare"] + t["judge"]) * 1000)
    share = Stat.of(shares).median
    ideal = [w / PARALLEL for w in serial]
    ratio = Stat.of([w / i for w, i in zip(wide, ideal, strict=True)]).median
    return [
        Row(
            f"23. eval: the engine's overhead per task, 1 s agent ({share:.1%} of the task's time in `once`)",
            Stat.of(engine),
            "the task's time in `once`",
            Stat.of(ran),
            f"<= {SHARE_TARGET:.0%}",
            share <= SHARE_TARGET,
        ),
        Row(
            f"23. eval: {TASKS} tasks at --parallel {PARALLEL} ({ratio:.2f}x the ideal)",
            Stat.of(wide),
            "ideal: a quarter of the serial eval",
            Stat.of(ideal),
            f"<= {PARALLEL_TARGET}x",
            ratio <= PARALLEL_TARGET,
            unit="s",
        ),
        info_row("23. eval: the harness's own time per task (probe, workspace, judging)", Stat.of(harness)),
        info_row("23. eval: the serial eval of 16 tasks", Stat.of(serial), unit="s"),
    ]


def run(reps: int) -> list[Row]:
    return measure(reps)


# -- 24: the demo set with the chain `init --agent claude` writes --------------------------

MODEL_SECONDS = 1.0


def solving(delay: float):
    """The scripted model: for each demo task, Read then Write each file of its reference fix
    (claude writes only a file it has read), then claim; every answer after `delay` seconds."""
    from mp_engine.eval.demo import specs
    from tests.conformance import fakemodel as fm

    fixes = {s["instance_id"]: list(s["fix"].items()) for s in specs()}

    def scenario(req: dict, _count: int):
        time.sleep(delay)  # the model's time: the server answers each call on its own thread
        said = fm.user_text(req)
        task = next((t for t in fixes if t in said), None)
        if task is None or "NONCE: " not in said:
            return fm.text("ok")
        messages = [m for m in req.get("messages") or [] if isinstance(m.get("content"), list)]
        results = sum(1 for m in messages for b in m["content"] if b.get("type") == "tool_result")
        if results < 2 * len(fixes[task]):
            path, content = fixes[task][results // 2]
            where = f"{fm.workdir_of(req)}/{path}"
            return (
                fm.tool("Read", file_path=where)
                if results % 2 == 0
                else fm.tool("Write", file_path=where, content=content)
            )
        return fm.text("Fixed.\n\n" + fm.status_block(fm.nonce_of(req)))

    return scenario


def run_demo(reps: int) -> list[Row]:
    """24. `mp-engine eval --demo` with the configuration `mp-engine init --agent claude`
    writes, the real claude (the conformance suite's pin, from its cache), a scripted model
    that fixes every task and takes 1 s per call: the demo set's report, figures to put a
    real model's beside. The report is also printed, for bench/RESULTS.md."""
    from tests.conformance import fakemodel as fm
    from tests.conformance.clis import installed

    exe = installed("claude")
    docs = []
    with tempfile.TemporaryDirectory(prefix="mpe-bench-evaldemo-") as tmp:
        base = Path(tmp)
        bin_dir = base / "bin"
        bin_dir.mkdir()
        (bin_dir / "claude").symlink_to(exe)
        env = {
            **engine_env(base),
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "ANTHROPIC_API_KEY": "sk-ant-bench-0123456789",
        }
        subprocess.run(
            ["mp-engine", "init", "--agent", "claude", str(base / "ws")], env=env, check=True, capture_output=True
        )
        with fm.FakeAnthropic(solving(MODEL_SECONDS)) as api:
            for rep in range(reps):
                out = base / f"out-{rep}"
                cmd = [
                    "mp-engine",
                    "eval",
                    "--demo",
                    "--config",
                    str(base / "ws" / "mp-engine.toml"),
                    "--out",
                    str(out),
                ]
                done = subprocess.run(cmd, env={**env, "ANTHROPIC_BASE_URL": api.url}, capture_output=True, text=True)
                if done.returncode != 0:
                    raise RuntimeError(f"the eval exited {done.returncode}: {done.stdout}{done.stderr}")
                docs.append(json.loads((out / "report.json").read_text()))
                print((out / "report.md").read_text())
    cs = [d["configs"][0] for d in docs]
    resolved = Stat.of([c["resolved"] / c["judged"] * 100 for c in cs])
    return [
        info_row("24. demo set, init --agent claude, scripted 1 s model: resolved (%)", resolved, unit="%"),
        info_row("24. demo set: time per task in `once`, p50", Stat.of([c["time_p50"] for c in cs]), unit="s"),
        info_row(
            "24. demo set: the engine's overhead per task, p50",
            Stat.of([c["engine_seconds_p50"] for c in cs]),
            unit="s",
        ),
        info_row(
            "24. demo set: the harness's time per task, p50", Stat.of([c["harness_seconds_p50"] for c in cs]), unit="s"
        ),
        info_row(
            "24. demo set: dollars per resolved task (claude's own figure)",
            Stat.of([c["cost_per_resolved"] or 0.0 for c in cs]),
            unit="$",
        ),
    ]
