"""The orchestrator's calls without a daemon: what they refuse before touching git, and
the approval header they add. (The whole exchange: tests/e2e/cmd_mcp/test_mcp.py.)"""

from __future__ import annotations

import json

from mp_engine.client.orchestrate import Orchestrator, with_approval
from mp_engine.inbox.mpfile import parse
from mp_engine.sync.session import GitSession
from tests.gitutil import git


def test_with_approval_adds_the_header_line_under_the_title_once():
    text = "\n# MP-2.1 Fix\nTimeout: 30\n\n```bash\ntrue\n```\n"
    approved = with_approval(text, "MP-2.0")
    assert approved == "\n# MP-2.1 Fix\nApproves: MP-2.0\nTimeout: 30\n\n```bash\ntrue\n```\n"
    assert parse(approved.encode()).approves == "MP-2.0"
    already = "# MP-2.1 Fix\nTimeout: 30\napproves: MP-1.9\n\n```bash\ntrue\n```\n"
    assert with_approval(already, "MP-2.0") == already  # send_mp then says it names another MP


def test_calls_refuse_bad_arguments_before_any_git(tmp_path):
    orch = Orchestrator(str(tmp_path / "no-such-remote"))
    assert "neither an MP id" in orch.wait_result("drop table", 0)["error"]
    assert "not a run id" in orch.get_run_file("../x", "a")["error"]
    assert "not a path inside" in orch.get_run_file("20261125T120000Z-MP-1.4", "../../SESSION_STATE.json")["error"]
    assert "not an MP id" in orch.cancel("everything")["error"]
    invalid = orch.send_mp("# MP-1.0\nTimeout: soon\n\n```bash\ntrue\n```\n")
    assert invalid["sent"] is False and "`Timeout: soon` is invalid" in invalid["reason"] and invalid["line"] == 2
    wrong = orch.send_mp("# MP-1.1 x\nApproves: MP-0.9\n\n```bash\ntrue\n```\n", approves="MP-1.0")
    assert wrong["sent"] is False and "approves MP-0.9, not MP-1.0" in wrong["reason"]


def test_a_run_s_result_is_its_archived_result_json_or_an_older_engine_s_result_last_json(tmp_path):
    # issue #44: the archive's result.json is RESULT_last.json's document; an older engine's
    # is not, and RESULT_last.json's history still has that run's.
    repo = tmp_path / "channel"
    git(tmp_path, "init", "--quiet", "-b", "main", str(repo))
    new = {"schema": "mp-engine/result/1", "run_id": "20261125T120000Z-MP-1.4", "status": "COMPLETED"}
    old = {"schema": "mp-engine/result/1", "run_id": "20261124T120000Z-MP-1.3", "status": "ERROR"}
    files = {
        "SYSTEM/RESULT_last.json": old,
        "SYSTEM/runs/20261124T120000Z-MP-1.3/result.json": {"run_id": old["run_id"], "extra": {}},
    }
    for files_now in (files, {"SYSTEM/runs/20261125T120000Z-MP-1.4/result.json": new}):
        for rel, doc in files_now.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(json.dumps(doc))
        git(repo, "add", "-A")
        git(repo, "commit", "--quiet", "-m", "results")
    s = GitSession(repo, 30)
    try:
        tip = s.rev("HEAD")
        orch = Orchestrator(str(tmp_path / "unused"))
        assert orch._result_document(s, tip, new["run_id"]) == new  # RESULT_last.json never named it
        assert orch._result_document(s, tip, old["run_id"]) == old
        assert orch._result_document(s, tip, "20261123T120000Z-MP-1.2") is None
    finally:
        s.close()
