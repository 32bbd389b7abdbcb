"""`mp-engine worker` (mp_engine/commands/worker.py): what it needs before it serves: the
Temporal address and the work repository, each with the fix when missing. Serving is
tested with real workers in tests/e2e/test_fleet.py."""

from __future__ import annotations

from mp_engine.cli.main import main
from mp_engine.commands.worker import work_remote


def test_the_work_repository_comes_from_the_flag_the_fleet_section_or_a_git_url():
    assert work_remote("origin", "", "file:///srv/work.git") == "file:///srv/work.git"
    assert work_remote("origin", "git@host:team/work.git", None) == "git@host:team/work.git"
    assert work_remote("https://host/work.git", "", None) == "https://host/work.git"
    assert work_remote("origin", "", None) is None  # a remote's name means nothing on the worker's host


def test_without_temporal_or_a_repository_the_worker_exits_2_with_the_fix(tmp_path, capsys):
    assert main(["worker", "--root", str(tmp_path)]) == 2
    assert "--temporal HOST:PORT" in capsys.readouterr().err
    assert main(["worker", "--root", str(tmp_path), "--temporal", "127.0.0.1:7233"]) == 2
    assert "--remote URL or set [fleet] work_remote" in capsys.readouterr().err
