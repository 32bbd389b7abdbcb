"""The eval directory's paths."""

from __future__ import annotations

from mp_engine.eval.layout import EvalDir, safe


def test_names_become_single_safe_directories():
    assert safe("psf/requests") == "psf_requests" and safe("../..") == "_" and safe("cheap-1.toml") == "cheap-1.toml"


def test_every_path_is_under_the_root(tmp_path):
    out = EvalDir(tmp_path / "e")
    paths = [out.manifest, out.tasks, out.results, out.config("a/b"), out.mirror("psf/requests"), out.probe("t")]
    paths += [out.workspace("a", "t"), out.judge_dir("a", "t"), out.logs("a", "t"), out.report("md")]
    assert all(p.is_relative_to(out.root) for p in paths)
    assert out.run_dir("a", "t") == out.prepared("a", "t").parent != out.workspace("a", "t").parent


def test_an_agent_is_hidden_all_of_the_eval_but_the_workspaces_and_the_task_s_other_runs(tmp_path):
    out = EvalDir(tmp_path)
    for p in (out.tasks, out.results, out.probe("t")):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("")
    out.workspace("a", "t").mkdir(parents=True)
    hidden = out.hidden("a", "t", ["a", "b"])
    assert hidden == [out.root / "probe", out.results, out.tasks, out.workspace("b", "t")]
    assert not any(out.workspace("a", "t").is_relative_to(h) for h in hidden)  # the sandbox hides no ancestor
