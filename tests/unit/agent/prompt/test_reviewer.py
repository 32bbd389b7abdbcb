"""The reviewer's prompt (issue #42): the goal, the tasks, every check with how it last ran
and its output, the whole diff (cut only when huge), earlier rounds, the answer block."""

from __future__ import annotations

from mp_engine.agent.prompt.reviewer import DIFF_CHARS, CheckSeen, prompt
from mp_engine.inbox.mpfile import parse

MP = parse(
    b"# MP-9.1 Greet\nExecutor: agent\n\nWrite hello.\n\n## Validate\n\n```bash\ngrep -qx hello a.txt\n```\n\n"
    b"```bash\ntest -f b.txt\n```\n"
)


def make(**over) -> str:
    first, second = MP.checks
    args = {
        "mp_id": "MP-9.1",
        "goal": "Write hello.",
        "tasks": ["- MT-001: Write hello."],
        "checks": [
            CheckSeen(first, True, "MT-001_iter-002_check-001", "ok"),
            CheckSeen(second, None, "", ""),
        ],
        "diff": "+hello\n",
        "earlier": [],
        "nonce": "n0nce",
    }
    return prompt(**{**args, **over})


def test_it_shows_the_goal_each_check_as_it_ran_and_the_diff():
    text = make()
    assert "## Goal\n\nWrite hello." in text and "- MT-001: Write hello." in text
    assert "check-001 (passed, MT-001_iter-002_check-001):" in text and "grep -qx hello a.txt" in text
    assert "check-002 (never ran, -):" in text
    assert "```diff\n+hello\n```" in text
    assert '<review nonce="n0nce">\nVERDICT: approve' in text and "VERDICT: changes" in text
    assert "read-only" in text


def test_a_huge_diff_is_cut_saying_so_and_earlier_rounds_are_recalled():
    text = make(
        diff="+x\n" * DIFF_CHARS,
        earlier=[{"round": 1, "verdict": "changes", "items": [{"target": "a.txt", "change": "louder"}]}],
    )
    assert "[... the diff is cut here]" in text
    assert "## Your review in round 1: changes\n\na.txt: louder" in text
