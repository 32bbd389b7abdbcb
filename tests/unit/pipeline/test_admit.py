"""Admission (mp_engine/admit.py): one verdict for an MP from the slot or the queue.
Engine-level paths (claim, drive, hold notices) are in test_engine.py and test_queued.py."""

from __future__ import annotations

import pytest

from mp_engine.config.load import load_config
from mp_engine.core.errors import InvalidMPError
from mp_engine.inbox.cancel_request import pending, request_on_host
from mp_engine.inbox.mpfile import parse
from mp_engine.pipeline.admit import Admitted, Ended, Held, Refused, admit
from mp_engine.pipeline.engine import Engine
from mp_engine.record.state import Halt
from tests.conftest import events, read_state, result_field

GOOD = b"# MP-6.1 Fine\n\n```bash\ntrue\n```\n"
APPROVING = b"# MP-6.2 Next\nApproves: MP-6.0\n\n```bash\ntrue\n```\n"


def halted(engine: Engine):
    halt = Halt(mp_id="MP-6.0", run_id="r0", reason="it failed", since="2026-11-26T00:00:00Z")
    return engine.state.update(halt=halt, reason="test halt")


def verdict(engine: Engine, data: bytes | None, parsed=None, **kw):
    if parsed is None:
        try:
            parsed = parse(data)
        except InvalidMPError as e:
            parsed = e
    return admit(engine.ctx, engine.state.read(), data, parsed, engine.executors, **kw)


def test_a_valid_mp_is_admitted_with_its_executor(engine):
    v = verdict(engine, GOOD)
    assert isinstance(v, Admitted) and v.mp.mp_id == "MP-6.1" and v.executor.name == "shell"


def test_an_invalid_mp_is_refused_with_its_fix(engine):
    v = verdict(engine, b"no header\n")
    assert isinstance(v, Refused) and "header" in v.error.reason and v.error.fix


def test_an_unknown_executor_is_refused(engine):
    v = verdict(engine, b"# MP-6.3\nExecutor: robot\n\n```bash\ntrue\n```\n")
    assert isinstance(v, Refused) and "robot" in v.error.reason


def test_while_halted_a_valid_mp_without_approves_is_held_and_an_invalid_one_too(engine):
    halted(engine)
    v = verdict(engine, GOOD)
    assert isinstance(v, Held) and v.mp is not None and "no `Approves:` header" in v.why
    v = verdict(engine, b"no header\n")
    assert isinstance(v, Held) and v.mp is None and v.why.startswith("invalid MP")
    assert read_state(engine.ws)["halt"]["mp_id"] == "MP-6.0"


def test_an_mp_approving_the_halt_lifts_it_once_admitted(engine, ws):
    halted(engine)
    v = verdict(engine, APPROVING)
    assert isinstance(v, Admitted)
    assert read_state(ws).get("halt") is None and events(ws, "approved")[-1]["by"] == "MP-6.2"


def test_an_entry_that_could_not_be_read_is_refused_or_held(engine):
    unreadable = InvalidMPError("the inbox entry is a directory", "Remove it.")
    assert isinstance(verdict(engine, None, parsed=unreadable), Refused)
    halted(engine)
    assert isinstance(verdict(engine, None, parsed=unreadable), Held)


def test_a_cancel_request_for_the_slot_s_mp_ends_it_before_it_starts(engine, ws):
    ws.inbox_file.write_bytes(GOOD)
    request_on_host(ws, "MP-6.1")
    v = verdict(engine, GOOD, cancels=pending(ws)[0])
    assert isinstance(v, Ended) and v.result.action == "cancelled"
    assert result_field(ws, "Status") == "CANCELLED"


def test_a_queued_version_is_not_cancelled_by_the_slot_s_rules(engine, ws):
    request_on_host(ws, "MP-6.1")
    v = verdict(engine, GOOD, cancels=pending(ws)[0], from_slot=False)
    assert isinstance(v, Admitted)


# --- `Repo:`, `Base:`, `Issue:` (issue #41) ---------------------------------------------

REPOS = '[repos.app]\nurl = "https://github.com/me/app.git"\ntoken_env = "APP_PAT"\n'


class RepoExecutor:
    """The shell executor, saying it works on other repositories (as the agent's will)."""

    works_on_repos = True

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.fixture(autouse=True)
def app_pat(monkeypatch):
    """The token `[repos.app]` names: the engine takes it out of the environment at start."""
    monkeypatch.setenv("APP_PAT", "github_pat_" + "x" * 40)


def repo_engine(ws, extra: str = "") -> Engine:
    ws.config_file.write_text(ws.config_file.read_text() + "\n" + REPOS + extra)
    eng = Engine(ws, load_config(ws.root))
    eng.start(daemon=False)
    return eng


def repo_verdict(engine: Engine, headers: str, *, works_on_repos: bool = True):
    data = f"# MP-6.7 Elsewhere\n{headers}\n\n```bash\ntrue\n```\n".encode()
    shell = engine.executors["shell"]
    executors = {"shell": RepoExecutor(shell) if works_on_repos else shell}
    return admit(engine.ctx, engine.state.read(), data, parse(data), executors)


def test_an_mp_on_a_configured_repository_is_admitted_with_its_base_and_issue(ws):
    v = repo_verdict(repo_engine(ws), "Repo: app\nBase: release/2.0\nIssue: #12")
    assert isinstance(v, Admitted) and v.mp.repo == "app"
    assert (v.mp.headers["Base"], v.mp.headers["Issue"]) == ("release/2.0", 12)


def test_an_unconfigured_repository_is_refused_with_the_fix_and_never_cloned(ws):
    engine = repo_engine(ws)
    v = repo_verdict(engine, "Repo: ap")
    assert isinstance(v, Refused) and "not configured" in v.error.reason and "configured: app" in v.error.reason
    assert v.error.fix == "Set `Repo:` to one of the configured repositories: app."
    assert not (ws.root / "SYSTEM" / ".engine" / "repos").exists()


def test_without_any_repository_configured_the_fix_is_the_table_to_add(engine):
    v = repo_verdict(engine, "Repo: app")
    assert isinstance(v, Refused) and "`[repos.app]` table" in v.error.fix


def test_base_and_issue_go_with_repo(engine):
    for header in ("Base: main", "Issue: 3"):
        v = repo_verdict(engine, header)
        assert isinstance(v, Refused) and "goes with `Repo:`" in v.error.reason, header


def test_an_issue_needs_a_forge(ws):
    engine = repo_engine(ws, '[repos.lab]\nurl = "git@git.example.com:me/lab.git"\nland = "branch"\n')
    v = repo_verdict(engine, "Repo: lab\nIssue: 3")
    assert isinstance(v, Refused) and "needs a forge" in v.error.reason


def test_an_executor_that_cannot_work_elsewhere_refuses_rather_than_work_on_the_channel(ws):
    v = repo_verdict(repo_engine(ws), "Repo: app", works_on_repos=False)
    assert isinstance(v, Refused) and "cannot do yet" in v.error.reason


def test_bad_header_values_are_refused_by_the_parser_with_the_fix(engine):
    for header, says in (("Repo: ../x", "Repo:"), ("Base: a..b", "Base:"), ("Issue: twelve", "Issue:")):
        v = verdict(engine, f"# MP-6.8\n{header}\n\n```bash\ntrue\n```\n".encode())
        assert isinstance(v, Refused) and says in v.error.reason and v.error.fix.startswith(f"Set `{says}"), header
