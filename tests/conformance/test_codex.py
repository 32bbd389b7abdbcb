"""Conformance: the real `codex exec` (npm @openai/codex, pinned in clis.py), configured
as docs/AGENT.md says, against a scripted fake OpenAI Responses API on loopback
(fakeopenai.py), driven through `Engine.tick()` (issue #16).

codex reaches a custom endpoint only through a model provider in `$CODEX_HOME/config.toml`
(it ignores `OPENAI_BASE_URL`); docs/AGENT.md shows that file. Every row runs twice: with
the documented `--json` (the agent's messages and the failure read from the JSON lines,
agent/structured.py) and without it, where codex prints the prompt on stderr (the echo
must not be read as the agent's claims)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest

from tests.agentutil import ONE, only_run, records
from tests.conformance import fakemodel as fm
from tests.conformance.clis import codex_home, installed
from tests.conformance.fakeopenai import FakeOpenAI, command, openai_error
from tests.conformance.harness import (
    BULKY,
    assert_reviewed,
    assert_sandboxed_exact,
    fake_worker,
    first_call,
    needs_sandbox,
    reviewing,
    run_mp,
)
from tests.conftest import read_state, result_field

pytestmark = pytest.mark.conformance

DOCUMENTED_ARGV = [
    "codex",
    "exec",
    "--json",
    "--ephemeral",
    "--sandbox",
    "workspace-write",
    "--skip-git-repo-check",
    "--cd",
    "{workspace}",
    "-",
]
PROVIDER = """model = "gpt-5.1-codex"
model_provider = "fake"

[model_providers.fake]
name = "fake"
base_url = "{url}/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
"""


def codex_level(exe, fmt: str = "json", **over) -> dict:
    argv = [str(exe), *DOCUMENTED_ARGV[1:]]
    if fmt == "text":
        argv.remove("--json")
    return {
        "name": "codex",
        "argv": argv,
        "stdin": True,
        "timeout": 120.0,
        "idle_timeout": 120.0,
        "env_allow": ["OPENAI_API_KEY", "CODEX_HOME"],
        "sandbox_rw": ["$CODEX_HOME", "~/.codex"],  # as the preset
        **over,
    }


@pytest.fixture
def codex_home_dir():
    with codex_home() as home:
        yield home


@pytest.fixture(params=["json", "text"])
def codex(request, ws, tmp_path, monkeypatch):
    exe = installed("codex")
    home = request.getfixturevalue("codex_home_dir")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CODEX_HOME", str(home))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-conformance-0123456789")
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")

    def run(scenario: fm.Scenario, mp: str = ONE, level: dict | None = None, **opts):
        with FakeOpenAI(scenario) as api:
            (home / "config.toml").write_text(PROVIDER.format(url=api.url))
            if opts.get("sandbox") == "os" or "reviewer" in opts:  # the fake model server: the host it may reach
                opts["sandbox_allow_hosts"] = [urlsplit(api.url).netloc]
            return run_mp(ws, level or codex_level(exe, request.param), mp, **opts), api

    run.exe, run.fmt = exe, request.param
    return run


def honest(req, count):
    """Write out/a.txt with a command (codex edits through its shell), then claim."""
    if count == 0:
        return command("mkdir -p out && printf 'hello\\n' > out/a.txt")
    return fm.text("Wrote out/a.txt.\n\n" + fm.status_block(fm.nonce_of(req)))


def test_it_works_in_the_engine_sandbox(codex, ws):
    """`[agent] sandbox = "os"` (issue #33): codex under bubblewrap, its own sandbox inside,
    the fake model server the one host it reaches; the work lands and the evidence says how."""
    needs_sandbox()
    result, api = codex(honest, sandbox="os")
    assert_sandboxed_exact(ws, result, api.url)


def test_it_edits_and_claims_exact(codex, ws):
    result, api = codex(honest)
    assert result.action == "completed", ws.result_file.read_text()
    assert result_field(ws, "Certificate") == "EXACT"
    assert (ws.root / "out" / "a.txt").read_text() == "hello\n"
    first = fm.user_text(api.calls()[0])
    assert "grep -qx hello out/a.txt" in first and "---LOOPR_STATUS---" in first
    outputs = [i for i in api.calls()[1]["input"] if i.get("type") == "function_call_output"]
    assert outputs and "call_0" == outputs[0]["call_id"]
    # Tokens as codex reported them (its --json turn.completed, the fake API's 100 in, 20 out
    # per request); plain text reports none, and the engine claims none.
    usage = first_call(ws).get("usage")
    if codex.fmt == "json":
        assert usage["input"] >= 200 and usage["output"] >= 40, usage
    else:
        assert usage is None
    if codex.fmt == "text":  # codex echoed the prompt (with the protocol's example claims) on stderr
        stderr = (only_run(ws).dir / "agent" / "MT-001" / "iter-001" / "stderr.txt").read_text()
        assert "<blocked nonce=" in stderr


def test_it_lies_and_is_never_exact(codex, ws):
    def liar(req, count):
        return fm.text("All done!\n\n" + fm.status_block(fm.nonce_of(req)))

    result, _ = codex(liar, max_iterations=2, fail_threshold=5)
    assert result.action == "error" and result_field(ws, "Certificate") == "TIMEOUT"
    recs = records(only_run(ws))
    assert [r["claimed"] for r in recs] == [True, True] and not any(r["gate"] for r in recs)


def test_edits_without_claiming_are_not_done_until_it_claims(codex, ws):
    def shy(req, count):
        if count == 0:
            return command("mkdir -p out && printf 'hello\\n' > out/a.txt")
        if count == 1:
            return fm.text("I wrote the file.")  # no status block, no claim
        return fm.text("Confirmed.\n\n" + fm.status_block(fm.nonce_of(req)))

    result, api = codex(shy, max_iterations=3)
    assert result.action == "completed" and result_field(ws, "Certificate") == "EXACT"
    recs = records(only_run(ws))
    assert [(r["claimed"], r["gate"]) for r in recs] == [(False, False), (True, True)]
    assert "claim" in fm.user_text(api.calls()[2]).lower()  # the second prompt says why it is not done


def test_an_answer_echoing_its_prompt_claims_nothing(codex, ws):
    """The model repeats the prompt (the protocol's example claims carry the real nonce):
    neither BLOCKED nor complete; the next iteration's honest answer completes."""
    result, _ = codex(fm.parrot(honest), max_iterations=3)
    assert result.action == "completed", ws.result_file.read_text()
    first = records(only_run(ws))[0]
    assert first["claimed"] is False and not first.get("blocked")


def test_a_401_ends_blocked_with_the_fix(codex, ws):
    result, api = codex(lambda req, count: openai_error(401, "invalid_api_key", "Incorrect API key provided"))
    assert result.action == "error"
    assert result_field(ws, "Certificate") == "BLOCKED" and result_field(ws, "Error-Kind") == "agent_auth"
    assert "env_allow" in ws.result_file.read_text() and len(api.calls()) == 1


def test_a_5xx_is_retried_then_blocked(codex, ws):
    result, api = codex(
        lambda req, count: openai_error(500, "server_error", "The server had an error"), transient_retries=1
    )
    assert result_field(ws, "Certificate") == "BLOCKED" and result_field(ws, "Error-Kind") == "agent_unavailable"
    assert "after 1 retries" in ws.result_file.read_text() and len(api.calls()) == 2


def test_a_429_rate_limit_waits_a_minute(codex, ws):
    result, api = codex(lambda req, count: openai_error(429, "rate_limit_exceeded", "Rate limit reached"))
    assert result.action == "waiting", result
    waiting = read_state(ws)["waiting"]
    assert waiting["kind"] == "usage_limit" and "429" in waiting["reason"]
    left = _resume(waiting) - datetime.now(UTC)
    assert 0 < left.total_seconds() <= 61 and len(api.calls()) == 1


@pytest.mark.parametrize("seconds", [20, 3 * 86400 + 600], ids=["same-minute", "other-day"])
def test_a_usage_limit_resumes_when_codex_says(codex, ws, seconds):
    """codex words the reset as a local clock time ("try again at 2:30 PM"), or with the
    date when it is not today ("try again at Nov 28th, 2026 2:43 PM"). The wait ends at
    the end of that minute: never before the reset, never a day late."""
    resets = datetime.now(UTC) + timedelta(seconds=seconds)
    limit = openai_error(
        429,
        "usage_limit_reached",
        "The usage limit has been reached",
        plan_type="plus",
        resets_at=int(resets.timestamp()),
        resets_in_seconds=seconds,
    )
    result, _ = codex(lambda req, count: limit)
    assert result.action == "waiting", result
    waiting = read_state(ws)["waiting"]
    assert "usage limit" in waiting["reason"] and "try again at" in waiting["reason"].lower()
    lead = (_resume(waiting) - resets).total_seconds()
    assert 0 <= lead <= 61, (waiting, resets)


def test_no_credit_left_ends_blocked_with_the_fix(codex, ws):
    """OpenAI's insufficient_quota: codex says "Quota exceeded. Check your plan and billing
    details." No wait helps: BLOCKED `agent_billing` with the fix."""
    quota = openai_error(429, "insufficient_quota", "You exceeded your current quota, please check your plan.")
    result, api = codex(lambda req, count: quota)
    assert result.action == "error" and result_field(ws, "Error-Kind") == "agent_billing", ws.result_file.read_text()
    assert result_field(ws, "Certificate") == "BLOCKED" and "Add credits" in ws.result_file.read_text()
    assert len(api.calls()) == 1


def test_a_hang_is_killed_by_the_idle_timeout(codex, ws):
    result, _ = codex(
        lambda req, count: fm.hang(30), level=codex_level(codex.exe, codex.fmt, idle_timeout=3.0), max_iterations=1
    )
    assert result.action == "error"
    call = first_call(ws)
    assert call["kind"] == "timeout" and call["idle_timed_out"] is True


def test_a_200_kb_prompt_goes_on_stdin(codex, ws):
    result, api = codex(honest, mp=BULKY)
    assert len(fm.user_text(api.calls()[0])) > 200_000
    assert result.action == "completed", ws.result_file.read_text()


def test_a_workspace_without_git_needs_info_and_codex_is_never_called(codex, ws):
    result, api = codex(honest, git_repo=False)
    assert result.action == "error" and result_field(ws, "Certificate") == "NEED_INFO"
    assert "git" in ws.result_file.read_text() and api.calls() == []


RUNS_ITS_CHECK = """# MP-3.3 Run the generator
Executor: agent

Run `sh gen.sh` in the workspace (it writes out/a.txt), then run the check below yourself.

## Validate

```bash
grep -qx hello out/a.txt
```
"""


def test_it_runs_the_mps_own_check_as_a_command(codex, ws):
    (ws.root / "gen.sh").write_text("mkdir -p out && echo hello > out/a.txt\n")

    def runner(req, count):
        if count == 0:
            return command("sh gen.sh")
        if count == 1:
            return command("grep -qx hello out/a.txt && echo CHECK-PASSED")
        return fm.text("Ran it and checked.\n\n" + fm.status_block(fm.nonce_of(req)))

    result, api = codex(runner, mp=RUNS_ITS_CHECK)
    assert result.action == "completed", ws.result_file.read_text()
    assert "CHECK-PASSED" in fm.user_text(api.calls()[2])


def test_the_sandbox_keeps_it_out_of_the_engines_files(codex, ws):
    """`--sandbox workspace-write` lets codex write its workspace (the run's worktree) and
    the temp dirs; the engine's checkout around it stays read-only to it. (/tmp is
    excluded here because the test workspace lives under it.)"""
    target = ws.root / "SESSION_STATE.json"
    before = target.read_bytes()

    def intruder(req, count):
        if count == 0:
            return command(f"echo '{{}}' > {target} && echo WROTE || echo REFUSED")
        return honest(req, count - 1)

    argv = [*codex_level(codex.exe, codex.fmt)["argv"]]
    argv[1:1] = [
        "-c",
        "sandbox_workspace_write.exclude_slash_tmp=true",
        "-c",
        "sandbox_workspace_write.exclude_tmpdir_env_var=true",
    ]
    result, api = codex(intruder, level=codex_level(codex.exe, codex.fmt, argv=argv))
    said = fm.user_text(api.calls()[1])
    assert "REFUSED" in said and "WROTE" not in said, said[-2000:]
    assert result.action == "completed" and target.read_bytes() != b"{}\n"
    assert before  # the engine kept writing its own state meanwhile


def test_the_rows_run_the_level_docs_agent_md_gives():
    import re
    import tomllib

    from tests.conformance.clis import REPO_ROOT

    docs = (REPO_ROOT / "docs" / "AGENT.md").read_text()
    blocks = [tomllib.loads(b) for b in re.findall(r"```toml\n(.*?)```", docs, re.S)]
    levels = [lv for b in blocks for lv in b.get("agent", {}).get("levels", []) if lv.get("name") == "codex"]
    assert levels and levels[0]["argv"] == DOCUMENTED_ARGV and levels[0]["stdin"] is True
    assert PROVIDER.split("\n[")[1].split("\n")[0] in docs  # the provider table docs/AGENT.md shows


def _resume(waiting: dict) -> datetime:
    return datetime.fromisoformat(waiting["resume_at"].replace("Z", "+00:00"))


# A planner level of codex (docs/AGENT.md, Plans): read-only sandbox, the rest as documented.
PLANNER_ARGV = [arg if arg != "workspace-write" else "read-only" for arg in DOCUMENTED_ARGV]

TWO_TASKS = {
    "tasks": [
        {
            "id": "b",
            "title": "Write the farewell",
            "description": "Write bye to out/b.txt.",
            "depends_on": ["a"],
            "checks": ["check-002"],
        },
        {"id": "a", "title": "Write the greeting", "description": "Write hello to out/a.txt.", "checks": ["check-001"]},
    ]
}


def planner_then_worker(req, count):
    """As the planner: try to write a file (the read-only sandbox must refuse), then answer
    with the plan under the prompt's nonce. As a worker: write what the task says, claim."""
    import re

    said = fm.user_text(req)
    ran = any(i.get("type") == "function_call_output" for i in req.get("input") or [])
    asked = re.search(r'^<plan nonce="([0-9a-f]+)">', said, re.M)
    if "# Planning for mp-engine" in said and asked:
        if not ran:
            return command("printf x > planner-was-here.txt && echo WROTE || echo REFUSED")
        return fm.text(f'The plan:\n<plan nonce="{asked.group(1)}">\n{json.dumps(TWO_TASKS)}\n</plan>')
    if ran:
        return fm.text("Done.\n\n" + fm.status_block(fm.nonce_of(req)))
    word, path = re.search(r"^Write (\w+) to (\S+)\.$", said, re.M).groups()
    return command(f"mkdir -p out && printf '{word}\\n' > {path}")


def test_a_planned_two_task_mp_runs_with_codex_as_planner_and_worker(codex, ws):
    """issue #17 with codex: the documented planner level (read-only sandbox) cannot write,
    and plans; the documented worker level carries out the tasks in dependency order."""
    import re
    import tomllib

    from tests.agentutil import PLANNED
    from tests.conformance.clis import REPO_ROOT
    from tests.gitutil import git

    docs = (REPO_ROOT / "docs" / "AGENT.md").read_text()
    documented = [
        tomllib.loads(b).get("agent", {}).get("planner") for b in re.findall(r"```toml\n(.*?)```", docs, re.S)
    ]
    assert PLANNER_ARGV in [p["argv"] for p in documented if p]

    planner = codex_level(codex.exe, codex.fmt, name="planner")
    planner["argv"] = [str(codex.exe), *PLANNER_ARGV[1:]]
    if codex.fmt == "text":
        planner["argv"].remove("--json")
    result, api = codex(planner_then_worker, PLANNED, planner=planner)
    assert result.action == "completed", ws.result_file.read_text()
    refused = fm.user_text(api.calls()[1])
    assert "REFUSED" in refused and "WROTE" not in refused, refused[-2000:]
    assert "planner-was-here.txt" not in git(ws.root, "log", "--all", "--name-only", "--format=")
    assert (ws.root / "out/a.txt").read_text() == "hello\n" and (ws.root / "out/b.txt").read_text() == "bye\n"
    assert git(ws.root, "log", "--format=%s", "-2").split("\n")[:2] == [
        "MP-4.1 MT-002: Write the farewell",
        "MP-4.1 MT-001: Write the greeting",
    ]


def test_codex_as_the_reviewer_asks_for_a_change_then_approves(codex, ws):
    """issue #42: `[agent.reviewer]` is `codex exec` in its read-only sandbox mode, inside
    the engine's read-only sandbox; its requested change goes back to the task, and its
    approval of round 2 lets the work land."""
    reviewer = codex_level(codex.exe, codex.fmt, name="reviewer")
    reviewer["argv"][reviewer["argv"].index("workspace-write")] = "read-only"
    result, api = codex(reviewing, level=fake_worker(), reviewer=reviewer)
    assert_reviewed(ws, result, api)
