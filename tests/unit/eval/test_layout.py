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
    assert out.workspace("a", "t").parent == out.run_dir("a", "t") == out.prepared("a", "t").parent
