"""`mp-engine check`: the structure of a valid MP, or the exact problem and its fix."""

from __future__ import annotations

import json

from mp_engine.commands.check import check
from mp_engine.core.exitcodes import ExitCode

AGENT_MP = """# MP-2.1 Health endpoint
Executor: agent

1. Add a `GET /healthz` endpoint.
2. Add a test for it.

## Validate
```bash
grep -q healthz app.py
```

```bash
# MT-002
python -m pytest -q
```
"""


class Out:
    def __init__(self) -> None:
        self.out: list[str] = []
        self.err: list[str] = []


def run(tmp_path, text: str, *, as_json: bool = False, max_bytes: int = 1 << 20) -> tuple[ExitCode, Out]:
    f = tmp_path / "mp.md"
    f.write_text(text)
    o = Out()
    return check(f, as_json, max_bytes, o.out.append, o.err.append), o


def test_a_micro_task_without_a_check_of_its_own_is_shown_merged(tmp_path):
    """Every check names MT-002, so MT-001 is merged into it (EXACT means verified)."""
    rc, o = run(tmp_path, AGENT_MP.replace("```bash\ngrep -q healthz app.py\n```\n\n", ""))
    text = "\n".join(o.out)
    assert rc == ExitCode.OK and "micro-tasks (1), each accepted by its checks:" in text
    assert "MT-001" in text and "[check-001]" in text and "MT-002" not in text.split("micro-tasks")[1]


def test_an_agent_mp_lists_its_micro_tasks_and_which_checks_accept_them(tmp_path):
    rc, o = run(tmp_path, AGENT_MP)
    assert rc == ExitCode.OK
    text = "\n".join(o.out)
    assert "micro-tasks (2), each accepted by its checks:" in text
    assert "MT-001" in text and "[check-001]" in text and "[check-001, check-002]" in text


def test_json_has_the_steps_checks_and_micro_tasks(tmp_path):
    rc, o = run(tmp_path, AGENT_MP, as_json=True)
    data = json.loads(o.out[0])
    assert rc == ExitCode.OK and data["mp_id"] == "MP-2.1"
    assert [t["id"] for t in data["micro_tasks"]] == ["MT-001", "MT-002"]


def test_a_shell_mp_without_anything_to_run_is_invalid_with_a_fix(tmp_path):
    rc, o = run(tmp_path, "# MP-2.2 Nothing\n\nJust words.\n")
    assert rc == ExitCode.MP_ERROR and o.out == []
    assert o.err[0].startswith(f"{tmp_path / 'mp.md'}: invalid MP:") and o.err[1].startswith("fix: ")


def test_the_size_cap_is_applied(tmp_path):
    rc, o = run(tmp_path, "# MP-2.3\n```bash\ntrue\n```\n" + "#" * 200, max_bytes=50)
    assert rc == ExitCode.MP_ERROR and "cap" in o.err[0]


def test_a_domain_tag_shows_the_route_the_micro_task_takes(tmp_path):
    tagged = AGENT_MP.replace("1. ", "1. [api] ", 1)
    rc, o = run(tmp_path, tagged)
    first = next(line for line in o.out if line.strip().startswith("MT-001"))
    assert rc == ExitCode.OK and first.endswith("(route: api)")
    rc, o = run(tmp_path, tagged, as_json=True)
    assert json.loads(o.out[0])["micro_tasks"][0]["domain"] == "api"


def test_a_planned_mp_says_its_micro_tasks_come_from_the_planner(tmp_path):
    rc, o = run(tmp_path, AGENT_MP.replace("Executor: agent\n", "Executor: agent\nPlan: auto\n"))
    text = "\n".join(o.out)
    assert rc == ExitCode.OK and "Plan: auto" in text
    assert "micro-tasks: planned at run time by `[agent.planner]`" in text and "MT-001" not in text
    rc, o = run(tmp_path, AGENT_MP.replace("Executor: agent\n", "Executor: agent\nPlan: later\n"))
    assert rc == ExitCode.MP_ERROR and "must be `auto`" in "\n".join(o.err)
