"""15. The engine's cost per iteration with each real agent CLI (issue #16).

The real claude, codex and aider (the conformance suite's pinned versions, from its cache,
installed on first use) answer a fake model API on loopback (tests/conformance/), with a
scripted honest agent: edit a file, claim completion. Through `Engine.tick()` in a git
workspace, MPs of 1 and 1 + EXTRA micro-tasks run; the difference over EXTRA is one
iteration (the CLI call, the checks, the evidence, the micro-task's commit) without the
per-MP work. Baseline, in the same run: the same CLI started by hand with the same argv,
environment and prompt, in a clone of the workspace, against the same server.
Target: at most 1.05x.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.agentloop_impl import run_mp
from bench.common import Row, Stat, agent_workspace, engine_env, engine_in_process, git, git_env

EXTRA = 2
LIMIT = 1.05
HELLO = "hello\n"


def mp(mp_id: str, tasks: int) -> str:
    items = "\n".join(f"{i}. Write hello to `out/a.txt`." for i in range(1, tasks + 1))
    checks = "\n".join(f"```bash\n# MT-{i:03d}\ngrep -qx hello out/a.txt\n```\n" for i in range(1, tasks + 1))
    return f"# {mp_id} bench\nExecutor: agent\n\nOne file.\n\n{items}\n\n## Validate\n\n{checks}"


def scenarios() -> dict[str, tuple[Any, Callable[[dict, int], Any]]]:
    """cli -> (fake server class, scenario keyed on the request, not on a global count)."""
    from tests.conformance import fakemodel as fm
    from tests.conformance.fakeopenai import FakeOpenAI, command

    def claude(req, _count):
        if any(
            isinstance(m.get("content"), list) and any(b.get("type") == "tool_result" for b in m["content"])
            for m in req.get("messages", [])
        ):
            return fm.text("Done.\n\n" + fm.status_block(fm.nonce_of(req)))
        return fm.tool("Write", file_path=f"{fm.workdir_of(req)}/out/a.txt", content=HELLO)

    def codex(req, _count):
        if any(i.get("type") == "function_call_output" for i in req.get("input", [])):
            return fm.text("Done.\n\n" + fm.status_block(fm.nonce_of(req)))
        return command("mkdir -p out && printf 'hello\\n' > out/a.txt")

    def aider(req, _count):
        return fm.text(f"Writing.\n\nout/a.txt\n```\n{HELLO}```\n\n" + fm.status_block(fm.nonce_of(req)))

    return {"claude": (fm.FakeAnthropic, claude), "codex": (FakeOpenAI, codex), "aider": (FakeOpenAI, aider)}


def level(cli: str, exe: Path, home: Path, url: str, codex_home: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The documented level (as the conformance rows run it) and the variables it needs."""
    if cli == "claude":
        from tests.conformance.test_claude import ENV, claude_level

        return claude_level(exe), {**ENV, "ANTHROPIC_BASE_URL": url}
    if cli == "codex":
        from tests.conformance.test_codex import PROVIDER, codex_level

        (codex_home / "config.toml").write_text(PROVIDER.format(url=url))
        return codex_level(exe), {"OPENAI_API_KEY": "sk-bench-0123456789", "CODEX_HOME": str(codex_home)}
    from tests.conformance.test_aider import aider_level

    return aider_level(exe), {
        "OPENAI_API_KEY": "sk-bench-0123456789",
        "AIDER_MODEL": "openai/fake-model",
        "OPENAI_API_BASE": url + "/v1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }


def toml_level(lv: dict[str, Any]) -> str:
    from tests.gitutil import toml_value

    return "[[agent.levels]]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in lv.items())


def by_hand(argv: list[str], stdin: Path | None, cwd: Path, env: dict[str, str]) -> float:
    # A clean clone each time (aider stages the files it creates): not timed.
    subprocess.run(["git", "reset", "-q", "--hard"], cwd=cwd, check=True, capture_output=True)
    subprocess.run(["git", "clean", "-fdxq"], cwd=cwd, check=True, capture_output=True)
    t0 = time.perf_counter()
    with open(stdin or os.devnull, "rb") as feed:
        proc = subprocess.run(argv, cwd=cwd, env=env, stdin=feed, capture_output=True)
    elapsed = time.perf_counter() - t0
    target = cwd / "out" / "a.txt"
    if proc.returncode != 0 or not target.exists() or target.read_text() != HELLO:
        said = (proc.stdout + proc.stderr).decode(errors="replace")[-1500:]
        raise RuntimeError(f"{argv[0]} by hand did not write out/a.txt (exit {proc.returncode}): {said}")
    return elapsed


def measure_cli(cli: str, reps: int) -> Row:
    from tests.conformance.clis import codex_home, installed

    try:
        exe = installed(cli)
    except BaseException as e:  # pytest.skip outside pytest: say why, measure nothing
        return Row(f"15. {cli} iteration", None, "-", None, f"<= {LIMIT:g}x", None, note=f"not measured: {e}")
    server_cls, scenario = scenarios()[cli]
    with (
        tempfile.TemporaryDirectory(prefix=f"mpe-bench-{cli}-") as tmp,
        codex_home() as codex_dir,  # outside codex's temp dir (docs/AGENT.md, "The sandbox")
        server_cls(scenario) as api,
    ):
        base = Path(tmp)
        home = base / "home"
        home.mkdir()
        lv, extra = level(cli, exe, home, api.url, codex_dir)
        env = {**engine_env(home, MP_ENGINE_ENGINE__SETTLE_SECONDS="0"), **extra}
        agent = "[agent]\nmax_iterations = 100\ncalls_per_hour = 100000\n\n" + toml_level(lv)
        ws = agent_workspace(base / "ws", env, agent)
        hand_dir = base / "hand"
        git(base, "clone", "-q", str(ws), str(hand_dir), env=git_env())
        with engine_in_process(ws, env) as engine:
            from mp_engine.agent.call.chain import render_argv
            from mp_engine.execute.process import scrub_env

            run_mp(engine, ws, mp("MP-0.1", 1))  # warm-up: the CLI's first start, caches
            prompt = sorted(ws.glob("SYSTEM/runs/*/agent/MT-001/iter-001/prompt.md"))[-1]
            level_cfg = engine.config.agent.levels[0]
            (base / "hand-evidence").mkdir()
            (base / "hand.ignore").write_text("/SYSTEM\n")
            values = {
                "prompt": prompt.read_text(),
                "prompt_file": str(prompt),
                "workspace": str(hand_dir),
                "mt_id": "MT-001",
                "evidence_dir": str(base / "hand-evidence"),
                "ignore_file": str(base / "hand.ignore"),
            }
            argv = render_argv(level_cfg, values)
            hand_env = scrub_env(level_cfg.env_allow)
            stdin = prompt if level_cfg.stdin else None
            per_iter, floor = [], []
            for i in range(reps):
                one = run_mp(engine, ws, mp(f"MP-1.{i}", 1))
                many = run_mp(engine, ws, mp(f"MP-2.{i}", 1 + EXTRA))
                per_iter.append((many - one) / EXTRA * 1000)
                floor.append(by_hand(argv, stdin, hand_dir, hand_env) * 1000)
    value, baseline = Stat.of(per_iter), Stat.of(floor)
    row = Row(f"15. {cli} iteration through the engine", value, f"{cli} by hand", baseline, f"<= {LIMIT:g}x", None)
    row.met = row.ratio is not None and row.ratio <= LIMIT
    row.note = f"engine's own time {value.median - baseline.median:.0f} ms median"
    return row


def run(reps: int) -> list[Row]:
    import sys

    clis = [a for a in sys.argv if a in ("claude", "codex", "aider")] or ["claude", "codex", "aider"]
    return [measure_cli(cli, reps) for cli in clis]
