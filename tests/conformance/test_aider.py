"""Conformance: the real `aider` (PyPI aider-chat, pinned in clis.py, in its own
virtualenv), configured as docs/AGENT.md says, against a scripted fake OpenAI Chat
Completions API on loopback (fakeopenai.py), driven through `Engine.tick()` (issue #16).

aider has no structured output: it prints the model's answer (and applies the edits it
contains, here in aider's "whole" file format) and exits 0 even after an API error, so the
engine reads claims and failures from its output. The model comes from `AIDER_MODEL`, the
endpoint from `OPENAI_API_BASE`, both passed through the level's `env_allow` as documented.
Its row in the engine's sandbox is test_presets.py's (the preset, no git identity)."""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest

from tests.agentutil import ONE, only_run, records
from tests.conformance import fakemodel as fm
from tests.conformance.clis import installed
from tests.conformance.fakeopenai import FakeOpenAI, openai_error
from tests.conformance.harness import (
    BULKY,
    assert_reviewed,
    fake_worker,
    first_call,
    reviewing,
    run_mp,
)
from tests.conftest import read_state, result_field
from tests.gitutil import git

pytestmark = pytest.mark.conformance

DOCUMENTED_ARGV = [
    "aider",
    "--yes-always",
    "--no-auto-commits",
    "--no-dirty-commits",
    "--no-gitignore",
    "--no-check-update",
    "--no-show-release-notes",
    "--no-analytics",
    "--no-show-model-warnings",
    "--no-pretty",
    "--no-fancy-input",
    "--no-detect-urls",
    "--aiderignore",
    "{ignore_file}",
    "--chat-history-file",
    "{evidence_dir}/aider.chat.md",
    "--input-history-file",
    "{evidence_dir}/aider.input.history",
    "--message-file",
    "{prompt_file}",
]
ENV_ALLOW = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_BASE", "AIDER_MODEL"]


def aider_level(exe, **over) -> dict:
    return {
        "name": "aider",
        "argv": [str(exe), *DOCUMENTED_ARGV[1:]],
        "timeout": 300.0,
        "idle_timeout": 120.0,
        # litellm fetches a price list from GitHub unless told to use its own copy.
        "env_allow": [*ENV_ALLOW, "LITELLM_LOCAL_MODEL_COST_MAP"],
        "sandbox_rw": ["~/.aider"],  # as the preset
        **over,
    }


@pytest.fixture
def aider(ws, tmp_path, monkeypatch):
    exe = installed("aider")
    monkeypatch.setenv("HOME", str(tmp_path))
    # A git identity, as most engine users have; test_presets.py runs the preset without one
    # (in the sandbox aider then finds the engine's, issue #44).
    (tmp_path / ".gitconfig").write_text("[user]\n\tname = Agent\n\temail = agent@example.invalid\n")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-conformance-0123456789")
    monkeypatch.setenv("AIDER_MODEL", "openai/fake-model")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")

    def run(scenario: fm.Scenario, mp: str = ONE, level: dict | None = None, **opts):
        with FakeOpenAI(scenario) as api:
            monkeypatch.setenv("OPENAI_API_BASE", api.url + "/v1")
            if opts.get("sandbox") == "os" or "reviewer" in opts:  # the fake model server: the host it may reach
                opts["sandbox_allow_hosts"] = [urlsplit(api.url).netloc]
            return run_mp(ws, level or aider_level(exe), mp, **opts), api

    run.exe = exe
    return run


def whole_file(path: str, content: str) -> str:
    """An edit in aider's "whole" format: the path, then the file in a fence."""
    return f"{path}\n```\n{content}```\n"


def honest(req, count):
    return fm.text("I'll write it.\n\n" + whole_file("out/a.txt", "hello\n") + "\n" + fm.status_block(fm.nonce_of(req)))


def test_it_edits_and_claims_exact(aider, ws):
    result, api = aider(honest)
    assert result.action == "completed", ws.result_file.read_text()
    assert result_field(ws, "Certificate") == "EXACT"
    assert (ws.root / "out" / "a.txt").read_text() == "hello\n"
    assert "grep -qx hello out/a.txt" in fm.user_text(api.calls()[0])
    # The transcript is evidence; nothing of aider's is in the workspace or its history.
    iter1 = only_run(ws).dir / "agent" / "MT-001" / "iter-001"
    assert "NONCE" in (iter1 / "aider.chat.md").read_text()
    assert not list(ws.root.glob(".aider*"))
    assert ".aider" not in git(ws.root, "log", "--all", "--name-only", "--format=")
    # Tokens as aider printed them ("Tokens: N sent, M received."), read from its output.
    usage = first_call(ws).get("usage")
    assert usage and usage["input"] > 0 and usage["output"] > 0, usage
    assert not (ws.root / ".gitignore").exists() or ".aider" not in (ws.root / ".gitignore").read_text()


ENGINE_FILES = """# MP-3.4 Mind the engine's files
Executor: agent

Write "hello" to `out/a.txt`. Do not read SESSION_STATE.json or mp-engine.toml.

## Validate

```bash
grep -qx hello out/a.txt
```
"""


def test_it_stays_off_the_engines_files_even_when_the_mp_names_them(aider, ws):
    def meddler(req, count):
        edits = whole_file("out/a.txt", "hello\n") + whole_file("mp-engine.toml", "hacked = true\n")
        return fm.text("Editing.\n\n" + edits + "\n" + fm.status_block(fm.nonce_of(req)))

    config = ws.config_file.read_bytes()
    result, api = aider(meddler, mp=ENGINE_FILES)
    sent = "\n".join(
        m.get("content") or "" for r in api.calls() for m in r["messages"] if isinstance(m.get("content"), str)
    )
    assert "[agent]" not in sent and '"state"' not in sent  # neither file's contents went to the model
    assert result.action == "completed", ws.result_file.read_text()
    assert b"hacked" not in ws.config_file.read_bytes() and ws.config_file.read_bytes().startswith(config[:20])
    assert "hacked" not in git(ws.root, "log", "-p", "--all", "--format=")


def test_it_lies_and_is_never_exact(aider, ws):
    result, _ = aider(lambda req, count: fm.text("All done!\n\n" + fm.status_block(fm.nonce_of(req))), max_iterations=2)
    assert result.action == "error" and result_field(ws, "Certificate") == "TIMEOUT"
    assert [r["claimed"] for r in records(only_run(ws))] == [True, True]


def test_edits_without_claiming_are_not_done_until_it_claims(aider, ws):
    def shy(req, count):
        if count == 0:
            return fm.text("Here it is.\n\n" + whole_file("out/a.txt", "hello\n"))
        return fm.text("Confirmed.\n\n" + fm.status_block(fm.nonce_of(req)))

    result, _ = aider(shy, max_iterations=3)
    assert result.action == "completed" and result_field(ws, "Certificate") == "EXACT"
    assert [(r["claimed"], r["gate"]) for r in records(only_run(ws))] == [(False, False), (True, True)]


def test_an_answer_echoing_its_prompt_claims_nothing(aider, ws):
    result, _ = aider(fm.parrot(honest), max_iterations=3)
    assert result.action == "completed", ws.result_file.read_text()
    first = records(only_run(ws))[0]
    assert first["claimed"] is False and not first.get("blocked")


def test_a_401_ends_blocked_with_the_fix_despite_exit_zero(aider, ws):
    result, api = aider(lambda req, count: openai_error(401, "invalid_api_key", "Incorrect API key provided"))
    assert result_field(ws, "Certificate") == "BLOCKED" and result_field(ws, "Error-Kind") == "agent_auth"
    assert records(only_run(ws))[0]["call"]["exit_code"] == 0 and len(api.calls()) == 1


def test_a_5xx_is_retried_then_blocked(aider, ws):
    """aider retries an outage itself for about a minute, then exits 0; the engine retries
    the call `transient_retries` times on top (0 here, to keep the row near a minute)."""
    result, api = aider(
        lambda req, count: openai_error(500, "server_error", "The server had an error"), transient_retries=0
    )
    assert result_field(ws, "Certificate") == "BLOCKED" and result_field(ws, "Error-Kind") == "agent_unavailable"
    assert len(api.calls()) > 3  # aider's own retries


def test_a_429_rate_limit_waits_a_minute(aider, ws):
    result, _ = aider(lambda req, count: openai_error(429, "rate_limit_exceeded", "Rate limit reached for requests"))
    assert result.action == "waiting", result
    waiting = read_state(ws)["waiting"]
    assert waiting["kind"] == "usage_limit" and "rate" in waiting["reason"].lower()
    left = datetime.fromisoformat(waiting["resume_at"].replace("Z", "+00:00")) - datetime.now(UTC)
    assert 0 < left.total_seconds() <= 61


def test_a_hang_is_killed_by_the_idle_timeout(aider, ws):
    result, _ = aider(lambda req, count: fm.hang(60), level=aider_level(aider.exe, idle_timeout=5.0), max_iterations=1)
    assert result.action == "error"
    call = first_call(ws)
    assert call["kind"] == "timeout" and call["idle_timed_out"] is True


def test_a_200_kb_prompt_goes_in_the_prompt_file(aider, ws):
    result, api = aider(honest, mp=BULKY)
    assert len(fm.user_text(api.calls()[0])) > 200_000
    assert result.action == "completed", ws.result_file.read_text()


def test_a_workspace_without_git_needs_info_and_aider_is_never_called(aider, ws):
    result, api = aider(honest, git_repo=False)
    assert result_field(ws, "Certificate") == "NEED_INFO" and api.calls() == []
    assert not (ws.root / ".git").exists()  # and no `git init` behind the operator's back


def test_the_rows_run_the_level_docs_agent_md_gives():
    import re
    import tomllib

    from tests.conformance.clis import REPO_ROOT

    docs = (REPO_ROOT / "docs" / "AGENT.md").read_text()
    blocks = [tomllib.loads(b) for b in re.findall(r"```toml\n(.*?)```", docs, re.S)]
    levels = [lv for b in blocks for lv in b.get("agent", {}).get("levels", []) if lv.get("name") == "aider"]
    assert levels and levels[0]["argv"] == DOCUMENTED_ARGV and levels[0]["env_allow"] == ENV_ALLOW


def test_aider_as_the_reviewer_asks_for_a_change_then_approves(aider, ws):
    """issue #42: `[agent.reviewer]` is aider, read-only in the sandbox (it cannot apply an
    edit there); its requested change goes back to the task, and its approval of round 2
    lets the work land."""
    result, api = aider(reviewing, level=fake_worker(), reviewer=aider_level(aider.exe, name="reviewer"))
    assert_reviewed(ws, result, api)
