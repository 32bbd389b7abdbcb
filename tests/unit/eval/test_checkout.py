"""The eval's repositories through real git: mirrors, fresh copies that hold no later history,
the agent's patch without the engine's files, the judging tests' files put back."""

from __future__ import annotations

import pytest

from mp_engine.eval.checkout import (
    CheckoutError,
    apply,
    commit_all,
    fresh_copy,
    mirror,
    patch_paths,
    restore,
    work_patch,
)
from tests.evalutil import ADD_TEST, CALC_FIXED, calc_repo, diff_of
from tests.gitutil import git


def test_a_fresh_copy_at_the_base_holds_its_history_and_nothing_after_it(tmp_path):
    repo, base = calc_repo(tmp_path / "calc")
    (repo / "calc.py").write_text(CALC_FIXED)
    git(repo, "commit", "-qam", "the fix")
    fix = git(repo, "rev-parse", "HEAD")
    source = tmp_path / "m.git"
    assert mirror(str(repo), source, base[:10]) == base  # the full id
    copy = tmp_path / "copy"
    assert fresh_copy(source, base, copy) == base
    assert git(copy, "log", "--all", "--format=%H") == base  # the fix is nowhere to be found
    assert git(copy, "cat-file", "-t", fix, check=False) == ""
    assert git(copy, "remote") == "" and git(copy, "status", "--porcelain") == ""


def test_a_mirror_fetches_a_commit_it_lacks_and_refuses_one_that_does_not_exist(tmp_path):
    repo, base = calc_repo(tmp_path / "calc")
    source = tmp_path / "m.git"
    mirror(str(repo), source, base)
    (repo / "calc.py").write_text(CALC_FIXED)
    git(repo, "commit", "-qam", "later")
    later = git(repo, "rev-parse", "HEAD")
    assert mirror(str(repo), source, later) == later
    with pytest.raises(CheckoutError, match="no commit|failed"):
        mirror(str(repo), source, "0" * 40)
    with pytest.raises(CheckoutError, match="cloning"):
        mirror(str(tmp_path / "nowhere"), tmp_path / "n.git", base)
    assert not (tmp_path / "n.git").exists()


def test_the_work_patch_leaves_the_engine_s_files_out(tmp_path):
    repo, base = calc_repo(tmp_path / "calc")
    (repo / "calc.py").write_text(CALC_FIXED)
    (repo / "SESSION_STATE.json").write_text("{}")
    (repo / "SYSTEM").mkdir()
    (repo / "SYSTEM" / "x.md").write_text("x")
    tip = commit_all(repo, "work and engine files")
    patch = work_patch(repo, base, tip)
    assert patch_paths(patch) == ["calc.py"]
    assert work_patch(repo, base, None) == ""


def test_patches_apply_and_restore_puts_the_judging_tests_files_back(tmp_path):
    repo, base = calc_repo(tmp_path / "calc")
    test_patch = diff_of(repo, {"tests/test_add.py": ADD_TEST, "tests/test_mul.py": "# emptied\n"})
    assert patch_paths(test_patch) == ["tests/test_add.py", "tests/test_mul.py"]
    (repo / "tests" / "test_add.py").write_text("cheat\n")  # the agent wrote where the hidden tests go
    (repo / "tests" / "test_mul.py").write_text("cheat\n")
    restore(repo, base, patch_paths(test_patch))
    assert not (repo / "tests" / "test_add.py").exists() and "mul(2, 3)" in (repo / "tests" / "test_mul.py").read_text()
    apply(repo, test_patch, what="the test patch")
    assert (repo / "tests" / "test_add.py").read_text() == ADD_TEST
    apply(repo, test_patch, what="the test patch", reverse=True)
    assert git(repo, "status", "--porcelain") == ""
    apply(repo, "", what="nothing")
    with pytest.raises(CheckoutError, match="the broken patch failed"):
        apply(repo, "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-no\n+yes\n", what="the broken patch")


def test_commit_all_with_fixed_dates_gives_the_same_commit_everywhere(tmp_path):
    ids = []
    for name in ("one", "two"):
        repo = tmp_path / name
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        (repo / "f.txt").write_text("same\n")
        ids.append(commit_all(repo, "same", when="2024-01-01T00:00:00+00:00"))
    assert ids[0] == ids[1]
