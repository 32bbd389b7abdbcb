"""Conformance: the real `claude` CLI (npm @anthropic-ai/claude-code, pinned in clis.py),
configured exactly as docs/AGENT.md says, against a scripted fake Anthropic API on
loopback (fakemodel.py), driven through `Engine.tick()` (issue #16).

Each row is one behaviour docs/AGENT.md promises: the agent edits and claims (EXACT);
it lies (never EXACT); 401 (BLOCKED with the fix); 429 (waits a minute); 529 overloaded
(retried, then BLOCKED); it hangs (the idle timeout kills its group); a 200 KB prompt
(stdin, no ARG_MAX); a task that needs it to run the MP's own check (a command)."""

from __future__ import annotations

import json
import re
from urllib.parse import urlsplit

import pytest

from tests.agentutil import ONE, PLANNED, only_run, records
from tests.conformance import fakemodel as fm
from tests.conformance.clis import installed
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
from tests.conftest import result_field
from tests.gitutil import git

pytestmark = pytest.mark.conformance

# docs/AGENT.md's level for Claude Code (argv as documented, the binary by its path), with
# the fake API's address and key allowed through.
DOCUMENTED_ARGV = [
    "claude",
    "-p",
    "--permission-mode",
    "acceptEdits",
    "--allowedTools",
    "Bash",
    "--output-format",
    "json",
]
ENV = {
    "ANTHROPIC_API_KEY": "sk-ant-conformance-0123456789",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
}


def claude_level(exe, fmt: str = "json", **over) -> dict:
    return {
        "name": "claude",
        "argv": [str(exe), *DOCUMENTED_ARGV[1:-1], fmt],
        "stdin": True,
        "timeout": 120.0,
        "idle_timeout": 120.0,
        "env_allow": [
            "ANTHROPIC_API_KEY",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "ANTHROPIC_BASE_URL",
            *[k for k in ENV if k != "ANTHROPIC_API_KEY"],
        ],
        "sandbox_rw": ["~/.claude", "~/.claude.json"],  # as the preset
        **over,
    }


@pytest.fixture(params=["json", "text"])
def claude(request, ws, tmp_path, monkeypatch):
    """Runs an MP with a scenario: the real CLI, its own HOME, the fake API. Every row runs
    twice: with the documented `--output-format json` (claims and failures read from
    fields, agent/structured.py) and with plain text (the patterns, for other CLIs)."""
    exe = installed("claude")
    home = tmp_path / "claude-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # no operator settings, no login: only the API key
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)

    def run(scenario: fm.Scenario, mp: str = ONE, level: dict | None = None, **opts):
        with fm.FakeAnthropic(scenario) as api:
            monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
            if opts.get("sandbox") == "os" or "reviewer" in opts:  # the fake model server: the host it may reach
                opts["sandbox_allow_hosts"] = [urlsplit(api.url).netloc]
            return run_mp(ws, level or claude_level(exe, request.param), mp, **opts), api

    run.exe = exe
    run.fmt = request.param
    return run


def honest(req, count):
    """Write out/a.txt with the Write tool, then claim with the status block."""
    if count == 0:
        return fm.tool("Write", file_path=f"{fm.workdir_of(req)}/out/a.txt", content="hello\n")
    return fm.text("Wrote out/a.txt.\n\n" + fm.status_block(fm.nonce_of(req)))


def test_it_works_in_the_engine_sandbox(claude, ws):
    """`[agent] sandbox = "os"` (issue #33): claude under bubblewrap, the fake model server the
    one host it reaches; the work lands and the evidence says how the call was confined."""
    needs_sandbox()
    result, api = claude(honest, sandbox="os")
    assert_sandboxed_exact(ws, result, api.url)


def test_it_edits_and_claims_exact(claude, ws):
    result, api = claude(honest)
    assert result.action == "completed", ws.result_file.read_text()
    assert result_field(ws, "Certificate") == "EXACT"
    assert (ws.root / "out" / "a.txt").read_text() == "hello\n"
    # What the CLI sent: the engine's prompt (goal, check, protocol) on stdin, and the tool result.
    first = fm.user_text(api.messages()[0])
    assert "grep -qx hello out/a.txt" in first and "---LOOPR_STATUS---" in first
    assert any(
        b.get("type") == "tool_result"
        for m in api.messages()[1]["messages"]
        for b in m["content"]
        if isinstance(m["content"], list)
    )
    # Tokens and cost as the CLI reported them (issue #32): its JSON result sums the two
    # requests' usage; plain text reports none, and the engine claims none.
    usage = first_call(ws).get("usage")
    if claude.fmt == "json":
        assert usage["input"] >= 200 and usage["output"] >= 20 and usage["cost_usd"] is not None, usage
        assert "Agent usage:" in ws.result_file.read_text()
    else:
        assert usage is None


def test_it_lies_and_is_never_exact(claude, ws):
    def liar(req, count):
        return fm.text("All done!\n\n" + fm.status_block(fm.nonce_of(req)))

    result, _ = claude(liar, max_iterations=2, fail_threshold=5)
    assert result.action == "error"
    assert result_field(ws, "Certificate") != "EXACT" and not (ws.root / "out" / "a.txt").exists()
    recs = records(only_run(ws))
    assert [r["claimed"] for r in recs] == [True, True] and not any(r["gate"] for r in recs)


def test_a_401_ends_blocked_with_the_fix(claude, ws):
    result, api = claude(lambda req, count: fm.error(401, "authentication_error", "invalid x-api-key"))
    assert result.action == "error"
    text = ws.result_file.read_text()
    assert result_field(ws, "Certificate") == "BLOCKED" and result_field(ws, "Error-Kind") == "agent_auth", text
    assert "env_allow" in text or "log in" in text.lower()
    assert len(api.messages()) == 1  # no retry helps a bad key


def test_overloaded_is_retried_then_blocked(claude, ws):
    result, api = claude(
        lambda req, count: fm.error(529, "overloaded_error", "Overloaded"), transient_retries=1, max_iterations=3
    )
    assert result.action == "error"
    assert result_field(ws, "Certificate") == "BLOCKED" and result_field(ws, "Error-Kind") == "agent_unavailable"
    assert "Wait until the provider is back" in ws.result_file.read_text()
    # The engine's call and its one retry; claude itself retries a 529 a few times per call
    # (despite `x-should-retry: false`), which the engine's backoff comes on top of.
    assert "after 1 retries" in ws.result_file.read_text() and len(api.messages()) >= 2


def test_a_hang_is_killed_by_the_idle_timeout(claude, ws):
    result, _ = claude(
        lambda req, count: fm.hang(30),
        level=claude_level(claude.exe, claude.fmt, timeout=60.0, idle_timeout=2.0),
        max_iterations=1,
    )
    assert result.action == "error"
    call = first_call(ws)
    assert call["kind"] == "timeout" and call["idle_timed_out"] is True


def test_a_200_kb_prompt_goes_on_stdin(claude, ws):
    result, api = claude(honest, mp=BULKY)
    assert len(fm.user_text(api.messages()[0])) > 200_000
    assert result.action == "completed", ws.result_file.read_text()


def test_a_429_rate_limit_waits_a_minute(claude, ws):
    """claude prints a 429 as "API Error: Request rejected (429) · ... per-minute rate
    limit", without the `retry-after` the API sent: the MP waits `rate_limit_wait` (not
    the half hour of a usage limit), and nothing fails."""
    from datetime import UTC, datetime

    from tests.conftest import read_state

    message = "Number of request tokens has exceeded your per-minute rate limit"
    result, api = claude(lambda req, count: fm.error(429, "rate_limit_error", message, **{"retry-after": "30"}))
    assert result.action == "waiting" and result.run_id is not None, result
    waiting = read_state(ws)["waiting"]
    assert waiting["kind"] == "usage_limit" and "(429)" in waiting["reason"] and message in waiting["reason"]
    left = datetime.fromisoformat(waiting["resume_at"].replace("Z", "+00:00")) - datetime.now(UTC)
    assert 0 < left.total_seconds() <= 61
    # (the fixture stopped the engine: the run stays open and resumes at its next start)
    assert read_state(ws)["run_id"] == result.run_id and len(api.messages()) == 1


RUNS_A_COMMAND = """# MP-3.3 Run the generator
Executor: agent

Run `sh gen.sh` in the workspace: it writes out/a.txt.

## Validate

```bash
grep -qx hello out/a.txt
```
"""


def test_a_task_that_needs_a_command_runs_it_with_the_documented_level(claude, ws):
    (ws.root / "gen.sh").write_text("mkdir -p out && echo hello > out/a.txt\n")

    def runner(req, count):
        if count == 0:
            return fm.tool("Bash", command="sh gen.sh", description="run the generator")
        return fm.text("Ran it.\n\n" + fm.status_block(fm.nonce_of(req)))

    result, api = claude(runner, mp=RUNS_A_COMMAND)  # the documented level: edits, and Bash allowed
    assert result.action == "completed", ws.result_file.read_text()
    results = [b for m in api.messages()[1]["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert any(b.get("type") == "tool_result" and not b.get("is_error") for b in results), json.dumps(results)[:2000]


def test_under_accept_edits_alone_the_command_is_refused(claude, ws):
    """Why docs/AGENT.md's level adds `--allowedTools Bash`: without it claude may edit
    but not run a command ("This command requires approval"), so the check fails."""
    (ws.root / "gen.sh").write_text("mkdir -p out && echo hello > out/a.txt\n")

    def runner(req, count):
        if count == 0:
            return fm.tool("Bash", command="sh gen.sh", description="run the generator")
        return fm.text("Ran it.\n\n" + fm.status_block(fm.nonce_of(req)))

    argv = [str(claude.exe), "-p", "--permission-mode", "acceptEdits", "--output-format", claude.fmt]
    result, api = claude(runner, mp=RUNS_A_COMMAND, level=claude_level(claude.exe, argv=argv), max_iterations=1)
    results = [b for m in api.messages()[1]["messages"] if isinstance(m["content"], list) for b in m["content"]]
    refused = [b for b in results if b.get("type") == "tool_result" and b.get("is_error")]
    assert refused and "requires approval" in json.dumps(refused)
    assert result.action == "error" and not (ws.root / "out" / "a.txt").exists()


def test_the_rows_run_the_level_docs_agent_md_gives():
    import re
    import tomllib

    from tests.conformance.clis import REPO_ROOT

    docs = (REPO_ROOT / "docs" / "AGENT.md").read_text()
    blocks = [tomllib.loads(b) for b in re.findall(r"```toml\n(.*?)```", docs, re.S)]
    levels = [lv for b in blocks for lv in b.get("agent", {}).get("levels", []) if lv.get("name") == "claude"]
    assert levels and levels[0]["argv"] == DOCUMENTED_ARGV and levels[0]["stdin"] is True


def test_edits_without_claiming_are_not_done_until_it_claims(claude, ws):
    def shy(req, count):
        if count == 0:
            return fm.tool("Write", file_path=f"{fm.workdir_of(req)}/out/a.txt", content="hello\n")
        if count == 1:
            return fm.text("I wrote the file.")  # no status block, no claim
        return fm.text("Confirmed.\n\n" + fm.status_block(fm.nonce_of(req)))

    result, _ = claude(shy, max_iterations=3)
    assert result.action == "completed" and result_field(ws, "Certificate") == "EXACT"
    assert [(r["claimed"], r["gate"]) for r in records(only_run(ws))] == [(False, False), (True, True)]


def test_an_answer_echoing_its_prompt_claims_nothing(claude, ws):
    """The model repeats the prompt, whose protocol holds example claims with the real
    nonce: neither BLOCKED nor complete; the next iteration's honest answer completes."""
    result, _ = claude(fm.parrot(honest), max_iterations=3)
    assert result.action == "completed", ws.result_file.read_text()
    first = records(only_run(ws))[0]
    assert first["claimed"] is False and not first.get("blocked")


def test_a_workspace_without_git_needs_info_and_claude_is_never_called(claude, ws):
    result, api = claude(honest, git_repo=False)
    assert result_field(ws, "Certificate") == "NEED_INFO" and api.messages() == []


@pytest.mark.parametrize(
    "claim, seconds, words",
    [
        ("five_hour", 20, "session limit"),
        ("seven_day", 3 * 86400 + 900, "weekly limit"),
        ("seven_day_opus", 86400 + 41, "Opus limit"),
    ],
    ids=["session-same-minute", "weekly", "opus"],
)
def test_a_subscription_limit_resumes_when_claude_says(claude, ws, monkeypatch, claim, seconds, words):
    """On a subscription (`CLAUDE_CODE_OAUTH_TOKEN`, from `claude setup-token`) claude reads
    the API's unified rate-limit headers and says "You've hit your session limit · resets
    3:01pm (UTC)", or "weekly limit · resets Nov 28, 3:14pm (UTC)": the MP waits until the
    end of the stated minute (claude cuts the reset to the minute, or the hour), never
    before the reset and never a day late."""
    from datetime import UTC, datetime

    from tests.conftest import read_state

    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.setenv("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-conformance-0123456789")
    resets = int(datetime.now(UTC).timestamp()) + seconds
    headers = {
        "anthropic-ratelimit-unified-status": "rejected",
        "anthropic-ratelimit-unified-reset": str(resets),
        "anthropic-ratelimit-unified-representative-claim": claim,
    }
    limited = fm.error(429, "rate_limit_error", "Rate limited", **headers)
    result, _ = claude(lambda req, count: limited)
    assert result.action == "waiting", ws.result_file.read_text() if ws.result_file.exists() else result
    waiting = read_state(ws)["waiting"]
    assert words in waiting["reason"] and "resets" in waiting["reason"], waiting
    resume = datetime.fromisoformat(waiting["resume_at"].replace("Z", "+00:00"))
    lead = resume.timestamp() - resets
    assert 0 <= lead <= 61, (waiting, resets)


def test_no_credit_left_ends_blocked_with_the_fix(claude, ws):
    """An API key without credit: claude says "Credit balance is too low" (exit 1). No wait
    helps: BLOCKED `agent_billing`, the fix is to add credits, and no retry is made."""
    message = "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing."
    result, api = claude(lambda req, count: fm.error(400, "invalid_request_error", message))
    assert result.action == "error" and result_field(ws, "Error-Kind") == "agent_billing", ws.result_file.read_text()
    assert result_field(ws, "Certificate") == "BLOCKED" and "Add credits" in ws.result_file.read_text()
    assert len(api.messages()) == 1


# The plan the fake model answers: listed out of order, b after a.
TWO_TASKS = {
    "tasks": [
        {
            "id": "b",
            "title": "Write the farewell",
            "description": 'Write "bye" to `out/b.txt`.',
            "depends_on": ["a"],
            "files": ["out/b.txt"],
            "checks": ["check-002"],
        },
        {
            "id": "a",
            "title": "Write the greeting",
            "description": 'Write "hello" to `out/a.txt`.',
            "checks": ["check-001"],
        },
    ]
}


def planner_then_worker(req, count):
    """As the planner (the engine's planning prompt): first try to write a file (the
    documented planner level must refuse: it plans, it does not edit), then answer with the
    plan under the prompt's nonce. As a worker: write the file its task names with the
    Write tool, then claim."""
    said = fm.user_text(req)
    asked = re.search(r'^<plan nonce="([0-9a-f]+)">', said, re.M)
    last = req["messages"][-1]["content"]
    answered_tool = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
    if "# Planning for mp-engine" in said and asked:
        if not answered_tool:
            return fm.tool("Write", file_path=f"{fm.workdir_of(req)}/planner-was-here.txt", content="x\n")
        return fm.text(f'Here is the plan.\n<plan nonce="{asked.group(1)}">\n{json.dumps(TWO_TASKS)}\n</plan>')
    if answered_tool:
        return fm.text("Done.\n\n" + fm.status_block(fm.nonce_of(req)))
    task = re.search(r"^## Your micro-task now: MT-\d+\n(.*?)^## ", said, re.M | re.S)
    assert task, "a worker's prompt names its micro-task"
    content, path = re.search(r'Write "([^"]*)" to `([^`]+)`', task.group(1)).groups()
    return fm.tool("Write", file_path=f"{fm.workdir_of(req)}/{path}", content=content + "\n")


def test_a_planned_two_task_mp_runs_with_claude_as_planner_and_worker(claude, ws):
    """issue #17: the documented `[agent.planner]` (claude without edit permissions) plans,
    and its attempt to write a file is refused; the documented worker level carries out each
    task in dependency order, one commit each."""
    import tomllib

    from tests.conformance.clis import REPO_ROOT

    docs = (REPO_ROOT / "docs" / "AGENT.md").read_text()
    documented = [
        tomllib.loads(b).get("agent", {}).get("planner") for b in re.findall(r"```toml\n(.*?)```", docs, re.S)
    ]
    assert ["claude", "-p", "--output-format", "json"] in [p["argv"] for p in documented if p]
    planner = claude_level(claude.exe, claude.fmt, name="planner")
    planner["argv"] = [str(claude.exe), "-p", "--output-format", claude.fmt]
    result, api = claude(planner_then_worker, PLANNED, planner=planner)
    assert result.action == "completed", ws.result_file.read_text()
    assert result_field(ws, "Certificate") == "EXACT"
    assert (ws.root / "out/a.txt").read_text() == "hello\n" and (ws.root / "out/b.txt").read_text() == "bye\n"
    assert "planner-was-here.txt" not in git(ws.root, "log", "--all", "--name-only", "--format=")
    assert not list(ws.root.rglob("planner-was-here.txt")) and not list(ws.local_dir.rglob("planner-was-here.txt"))
    subjects = git(ws.root, "log", "--format=%s", "-2").split("\n")[:2]
    assert subjects == ["MP-4.1 MT-002: Write the farewell", "MP-4.1 MT-001: Write the greeting"]
    refused = [
        b
        for m in api.messages()[1]["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert refused and refused[-1].get("is_error"), refused  # the CLI refused the planner's Write
    planning = fm.user_text(api.messages()[0])
    assert "Create the greeting files the checks ask for" in planning and "check-002:" in planning
    result_json = json.loads((ws.system_dir / "RESULT_last.json").read_text())
    assert [(t["mt_id"], t["status"]) for t in result_json["micro_tasks"]] == [
        ("MT-001", "completed"),
        ("MT-002", "completed"),
    ]
    assert [d["at"] for d in result_json["drift_checks"]] == [50, 100]


def test_a_model_that_keeps_calling_tools_stops_at_max_turns_and_never_passes(claude, ws):
    """Issue #42: `max_turns = 2` reaches the CLI as `--max-turns 2`; a model that calls a
    tool on every turn ends there (claude: `error_max_turns`, or "Reached max turns" in text),
    and the engine counts that call as a failed iteration with its reason, never as success,
    even though the work is done and the checks pass."""

    def busy(req, count):
        if count == 0:
            return fm.tool("Write", file_path=f"{fm.workdir_of(req)}/out/a.txt", content="hello\n")
        return fm.tool("Bash", command=f"echo still working {count}")

    level = claude_level(claude.exe, claude.fmt, max_turns=2)
    result, api = claude(busy, level=level, max_iterations=2, max_no_progress=5)
    assert result.action == "error", ws.result_file.read_text()
    recs = records(only_run(ws))
    assert len(recs) == 2 and len(api.calls()) == 4  # two model turns per call, not one more
    for rec in recs:
        assert rec["call"]["kind"] == "turn_limit" and not rec["gate"] and rec["failing"] == []
        assert "stopped at --max-turns 2" in rec["call"]["detail"]
    assert result_field(ws, "Certificate") in ("TIMEOUT", "DIVERGED")  # out of iterations, or no status block


def test_claude_as_the_reviewer_asks_for_a_change_then_approves(claude, ws):
    """issue #42: `[agent.reviewer]` is claude without edit permissions (as docs/AGENT.md
    gives it), read-only in the sandbox; its requested change goes back to the task, and
    its approval of round 2 lets the work land."""
    reviewer = claude_level(claude.exe, claude.fmt, name="reviewer")
    reviewer["argv"] = [str(claude.exe), "-p", "--output-format", claude.fmt]
    result, api = claude(reviewing, level=fake_worker(), reviewer=reviewer)
    assert_reviewed(ws, result, api)
