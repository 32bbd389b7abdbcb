"""Answering an agent MP that asked, through the real daemon and a real git remote (issue
#32): by an MP with `Answers:`, by `send --answer`, and by `mp-engine answer` on the host.
Each resumes the same run, which ends EXACT with one commit per task on `mp/<MP-id>`; an
answer to an MP that waits for none is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.agentutil import ONE, configure, level
from tests.conftest import read_state, wait_for
from tests.e2e.cmd_send.test_send import GIT_ENV, finish, send
from tests.gitutil import engine_workspace, git, make_remote, remote_file

pytestmark = pytest.mark.daemon


def asking(n: int) -> str:
    return ONE.replace("MP-3.2", f"MP-3.{n}")


def last(bare) -> dict:
    return json.loads(remote_file(bare, "SESSION_STATE.json") or "{}").get("last_result") or {}


def ended_again(bare, mp_id: str, run_id: str) -> bool:
    lr = last(bare)
    return lr.get("mp_id") == mp_id and lr.get("run_id") == run_id and lr.get("status") == "COMPLETED"


def test_each_route_resumes_the_same_run_and_a_stray_answer_is_refused(tmp_path, daemon_factory):
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url, poll_interval=0.3)
    configure(ws, [level("asker", "asker.py")], land="branch")
    d = daemon_factory(ws.root, env=GIT_ENV).start()
    env = {**os.environ, **GIT_ENV}
    try:
        wait_for(lambda: read_state(ws)["status"] == "ONLINE", what=d.output)
        for n, route in ((4, "mp"), (5, "send"), (6, "host")):
            mp_id = f"MP-3.{n}"
            code, out, err = finish(send(tmp_path, asking(n), url, name=f"{mp_id}.md"))
            assert code == 1 and f"mp-engine answer {mp_id}" in out, out + err + d.output()[-3000:]
            run_id = last(bare)["run_id"]
            if route == "mp":
                text = f"# MP-3.{n}9 The answer\nAnswers: {mp_id}\n\nPostgreSQL 16.\n"
                code, out, err = finish(send(tmp_path, text, url, name="answer.md"))
                assert code == 0 and "Status: COMPLETED" in out, out + err
            elif route == "send":
                (tmp_path / "answer.txt").write_text("PostgreSQL 16.\n")
                p = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "mp_engine",
                        "send",
                        "--answer",
                        mp_id,
                        str(tmp_path / "answer.txt"),
                        "--repo",
                        url,
                        "--wait",
                        "--poll",
                        "0.1",
                        "--timeout",
                        "60",
                    ],
                    capture_output=True,
                    text=True,
                    timeout=90,
                    env=env,
                )
                assert p.returncode == 0 and "Certificate: EXACT" in p.stdout, p.stdout + p.stderr
            else:
                p = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "mp_engine",
                        "answer",
                        mp_id,
                        "PostgreSQL 16.",
                        "--root",
                        str(ws.root),
                        "--timeout",
                        "30",
                    ],
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                assert p.returncode == 0 and f"answered {mp_id}: its run {run_id} goes on" in p.stdout, p.stderr
            wait_for(
                lambda mp_id=mp_id, run_id=run_id: ended_again(bare, mp_id, run_id),
                timeout=60,
                what=lambda: d.output()[-3000:],
            )
            result = json.loads(remote_file(bare, "SYSTEM/RESULT_last.json"))
            assert result["certificate"]["type"] == "EXACT" and result["run_id"] == run_id
            subjects = git(bare, "log", "--format=%s", f"mp/{mp_id}").splitlines()
            assert [s.split(":")[0] for s in subjects if s.startswith(f"{mp_id} MT-")] == [f"{mp_id} MT-001"]
            assert not any("work not yet committed" in s for s in subjects)
        (tmp_path / "stray.txt").write_text("an answer to nothing\n")
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "mp_engine",
                "send",
                "--answer",
                "MP-3.6",
                str(tmp_path / "stray.txt"),
                "--repo",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert p.returncode == 6 and "MP-3.6 waits for no answer" in p.stderr, p.stdout + p.stderr
    finally:
        d.signal(signal.SIGTERM)
        d.wait()
