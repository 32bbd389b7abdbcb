"""Context compilation (issue #17): what of the repository a worker's prompt carries, within
`[agent] token_budget`: the files the MP's goal and micro-tasks name (their contents: the same
for every task, so a prefix cache serves them from one task to the next) and the repository
map (repomap.py: paths and signatures, no bodies). A level without tools of its own (an
`ollama run` model) sees the code only through this.

Tokens are counted offline, without a model's tokenizer: one token per 4 bytes of UTF-8,
rounded up (the usual estimate for English and code with BPE tokenizers; it errs on the
long side for code). The allocation follows the micro-task spec (2.6.6.8.8): the prompt's
fixed parts (rules, the task, the checks, the protocol, the iteration's context) come
first; of what the budget leaves, the map gets 40 % when the text names files (all of it
otherwise) and the named files what the map left. A file that does not fit is cut, saying
so. The map starts with the files beside the named ones, each with its signatures while
they fit, then paths only, then says how many files are left out; only files whose
signatures fit are parsed, so a large repository costs a listing, not a parse of every file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from mp_engine.agent.prompt.repomap import RepoMap
from mp_engine.record.outcome import fenced

FILES_SHARE = 0.6
# The context takes what the budget leaves in steps of 1/STEPS of it: the map stays the same
# while the learnings and the output tails grow, so a prefix cache keeps serving it.
STEPS = 8
PATH_RE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z0-9]{1,8})(?![\w/-])")


def tokens(text: str) -> int:
    """The offline estimate: ceil(UTF-8 bytes / 4)."""
    return -(-len(text.encode("utf-8")) // 4)


def named_files(text: str, root: Path, known: set[str]) -> list[str]:
    """Paths the task text names that are files of the worktree, in the order named."""
    return [rel for rel in mentioned(text) if rel in known and (root / rel).is_file()]


def fill(
    token_budget: int,
    build: Callable[[str], str],
    task_text: str,
    repomap: Callable[[], RepoMap],
    frozen: dict[int, str] | None = None,
) -> str:
    """`build(context)` with as much context as `token_budget` leaves once the rest of the
    prompt is counted (none when the budget is 0 or spent); `repomap` gives the (cached)
    map only when there is room for it; `frozen` keeps the map's text per budget for the
    run (see `compile_context`). Worker and planner prompts are both made this way."""
    bare = build("")
    left = token_budget - tokens(bare)
    left -= left % max(1, token_budget // STEPS)  # stable while the rest of the prompt grows a little
    if token_budget == 0 or left <= 0:
        return bare
    return build(compile_context(task_text, repomap(), left, frozen))


def mentioned(text: str) -> list[str]:
    """The paths `text` names, as written (whether or not they exist yet)."""
    return list(dict.fromkeys(m.group(1).lstrip("./") for m in PATH_RE.finditer(text)))


def compile_context(task_text: str, repomap: RepoMap, budget: int, frozen: dict[int, str] | None = None) -> str:
    """The `## Repository map` and `## Files the MP names` sections within `budget` tokens
    (empty when nothing fits). The map comes first and, with `frozen`, is the map as the
    run first made it for this budget: the same bytes in every prompt of the run, so a
    prefix cache keeps serving it while the agent adds files (issue #34); the named
    files, after it, are shown as they are now. The map's share is fixed by what the text
    names (not by what exists yet), for the same reason."""
    if budget <= 0:
        return ""
    named = mentioned(task_text)
    map_budget = budget - int(budget * FILES_SHARE) if named else budget
    map_text = frozen.get(map_budget) if frozen is not None else None
    paths = repomap.paths() if map_text is None or named else []  # one `git ls-files`, when needed
    if map_text is None:
        map_text = _map(repomap, paths, {str(Path(f).parent) for f in named}, map_budget, frozen is not None)
        repomap.save(keep=paths)
        if frozen is not None:
            frozen[map_budget] = map_text
    out = [map_text] if map_text else []
    files = named_files(task_text, repomap.root, set(paths)) if named else []
    if files:
        allowance = budget - tokens(map_text)
        part = ["## Files the MP names (as they are now)", ""]
        for rel in files:
            room = allowance - tokens("\n".join(part))
            if room < 50:
                part.append(f"({rel} and later files left out: the token budget is spent)")
                break
            limit = (room - 20) * 4
            with open(repomap.root / rel, "rb") as f:  # never more than fits: a file may be huge
                raw = f.read(limit + 1)
            if b"\0" in raw[:8192]:
                part += [f"{rel}: (binary, not shown)", ""]
                continue
            body = raw[:limit].decode("utf-8", "ignore")
            if len(raw) > limit:
                body += "\n[... cut: over the token budget]"
            part += [f"{rel}:", fenced(body), ""]
        out.append("\n".join(part) + "\n")
    return "\n".join(out)


def _map(repomap: RepoMap, paths: list[str], near: set[str], budget: int, as_found: bool = False) -> str:
    """The map within `budget`: the files beside the named ones first, then the others by
    path; each with its signatures while they fit (only those files are parsed), then paths
    only, then how many more files there are."""
    head = f"## Repository map (paths and signatures, no bodies{'; as this run found it' if as_found else ''})\n\n"
    used = tokens(head) + 20  # room for the closing line
    if used >= budget:
        return ""
    order = sorted(paths, key=lambda p: (str(Path(p).parent) not in near, p))
    lines: list[str] = []
    with_sigs = True
    for i, rel in enumerate(order):
        if with_sigs:
            block = rel + "".join(f"\n    {s}" for s in repomap.sigs(rel))
            cost = tokens(block + "\n")
            if used + cost <= budget:
                lines.append(block)
                used += cost
                continue
            with_sigs = False  # from here on, paths only
        cost = tokens(rel + "\n")
        if used + cost > budget:
            lines.append(f"... and {len(order) - i} more files (left out: the token budget)")
            break
        lines.append(rel)
        used += cost
    else:
        if not with_sigs:
            lines.append("(later files without their signatures: the token budget)")
    return head + "\n".join(lines) + "\n"
