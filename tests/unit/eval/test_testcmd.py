"""The judge's commands: a test command over many tests at once, and one by one when the
group fails; a stop cuts them short and proves nothing."""

from __future__ import annotations

import threading

import pytest

from mp_engine.eval.testcmd import Interrupted, Shell, outcomes, render


def test_render_quotes_every_test_name():
    assert render("pytest {tests}", ["a b", "c;rm"]) == "pytest 'a b' 'c;rm'"
    assert render("run {test}", ["x"]) == "run x"


def test_a_passing_group_is_one_run_and_a_failing_one_is_told_apart_test_by_test(tmp_path):
    shell = Shell(tmp_path, tmp_path / "logs")
    # Each "test" passes when its name starts with ok; the command logs every run.
    cmd = "echo run >> runs.log; for t in {tests}; do case $t in ok*) ;; *) exit 1;; esac; done"
    assert outcomes(shell, cmd, ["ok1", "ok2"], "g") == {"ok1": True, "ok2": True}
    assert (tmp_path / "runs.log").read_text().count("run") == 1
    assert outcomes(shell, cmd, ["ok1", "bad", "ok3"], "h") == {"ok1": True, "bad": False, "ok3": True}
    assert (tmp_path / "runs.log").read_text().count("run") == 5  # the group, then three alone
    assert outcomes(shell, "for t in {test}; do test $t = ok; done", ["ok", "no"], "s") == {"ok": True, "no": False}
    assert outcomes(shell, cmd, [], "none") == {}
    assert (tmp_path / "logs" / "h.out").exists() and (tmp_path / "logs" / "h-002.err").exists()


def test_a_stop_now_cuts_a_command_short_and_says_so(tmp_path):
    stop = threading.Event()
    stop.set()
    shell = Shell(tmp_path, tmp_path / "logs", stop_now=stop)
    with pytest.raises(Interrupted):
        outcomes(shell, "sleep 30 # {tests}", ["t"], "stopped")


def test_the_tail_of_a_command_s_output_is_kept_for_the_verdict(tmp_path):
    shell = Shell(tmp_path, tmp_path / "logs")
    assert not shell.run("setup", "echo preparing; echo broken >&2; exit 3").ok
    assert shell.tail("setup") == "preparing\nbroken"
    assert shell.tail("never-ran") == ""
