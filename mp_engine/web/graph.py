"""The plan's dependencies drawn as a graph (issue #32): a layered layout of the tasks,
left to right (a task's column is the length of the longest chain of tasks it needs),
as coordinates a template draws as SVG. Pure: tasks in, boxes and arrows out."""

from __future__ import annotations

from typing import Any

BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 168, 46, 56, 18, 8
LABEL_CHARS = 24  # of a title in a box (11 px text); the whole title is the node's tooltip


def layout(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """`tasks`: each with `mt_id`, `title`, `status` and `after` (the ids it needs)."""
    by_id = {t["mt_id"]: t for t in tasks}
    depth: dict[str, int] = {}

    def column(mt: str, seen: frozenset[str] = frozenset()) -> int:
        if mt not in depth:
            needs = [a for a in by_id[mt].get("after") or [] if a in by_id and a not in seen]
            depth[mt] = 1 + max((column(a, seen | {mt}) for a in needs), default=-1)
        return depth[mt]

    rows: dict[int, int] = {}
    nodes = {}
    for t in tasks:  # plan order within each column
        col = column(t["mt_id"])
        row = rows.get(col, 0)
        rows[col] = row + 1
        nodes[t["mt_id"]] = {
            "id": t["mt_id"],
            "title": str(t.get("title") or ""),
            "label": fit(str(t.get("title") or ""), LABEL_CHARS),
            "status": t.get("status") or "pending",
            "x": PAD + col * (BOX_W + GAP_X),
            "y": PAD + row * (BOX_H + GAP_Y),
        }
    edges = []
    for t in tasks:
        to = nodes[t["mt_id"]]
        for a in t.get("after") or []:
            if a in nodes:
                fr = nodes[a]
                edges.append(
                    {"x1": fr["x"] + BOX_W, "y1": fr["y"] + BOX_H / 2, "x2": to["x"], "y2": to["y"] + BOX_H / 2}
                )
    return {
        "nodes": list(nodes.values()),
        "edges": edges,
        "width": 2 * PAD + (max(depth.values(), default=0) + 1) * (BOX_W + GAP_X) - GAP_X,
        "height": 2 * PAD + max(rows.values(), default=1) * (BOX_H + GAP_Y) - GAP_Y,
        "box_w": BOX_W,
        "box_h": BOX_H,
    }


def fit(text: str, chars: int) -> str:
    """`text` in at most `chars` characters, cut at a word with an ellipsis (issue #44: a
    label cut mid-word); a single long word is cut where it must be."""
    text = " ".join(text.split())
    if len(text) <= chars:
        return text
    head = text[: chars - 1]
    cut = head.rsplit(" ", 1)[0] if " " in head else head
    return cut.rstrip(" ,;:.-–—") + "…"
