"""The plan drawn as a graph: a task's column is its longest chain of needs; arrows run
from each task it needs to it."""

from __future__ import annotations

from mp_engine.web.graph import BOX_H, BOX_W, fit, layout


def t(mt, *after, status="pending"):
    return {"mt_id": mt, "title": f"title of {mt}", "status": status, "after": list(after)}


def test_columns_follow_the_longest_chain_and_rows_the_plan_order():
    g = layout([t("MT-001"), t("MT-002"), t("MT-003", "MT-001"), t("MT-004", "MT-003", "MT-002")])
    at = {n["id"]: (n["x"], n["y"]) for n in g["nodes"]}
    assert at["MT-001"][0] == at["MT-002"][0] < at["MT-003"][0] < at["MT-004"][0]
    assert at["MT-001"][1] < at["MT-002"][1] and at["MT-003"][1] == at["MT-001"][1]
    assert len(g["edges"]) == 3
    into4 = [e for e in g["edges"] if e["x2"] == at["MT-004"][0]]
    assert sorted(e["x1"] for e in into4) == sorted([at["MT-003"][0] + BOX_W, at["MT-002"][0] + BOX_W])
    assert g["width"] >= at["MT-004"][0] + BOX_W and g["height"] >= at["MT-002"][1] + BOX_H


def test_unknown_needs_and_cycles_do_not_break_the_drawing():
    g = layout([t("MT-001", "MT-002"), t("MT-002", "MT-001"), t("MT-003", "MT-999")])
    assert {n["id"] for n in g["nodes"]} == {"MT-001", "MT-002", "MT-003"}
    assert layout([])["nodes"] == []


def test_a_node_s_label_is_cut_at_a_word_and_its_whole_title_kept():
    # issue #44: `title[:24]` cut mid-word.
    (n,) = layout([{"mt_id": "MT-001", "title": "Write the three files the checks ask for", "status": "active"}])[
        "nodes"
    ]
    assert n["label"] == "Write the three files…" and n["title"] == "Write the three files the checks ask for"
    assert fit("short title", 24) == "short title" and fit("a" * 30, 24) == "a" * 23 + "…"
