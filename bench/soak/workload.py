"""The soak's schedule, pure and seeded: which MPs an orchestrator sends, in which order and
by which route, and which faults strike after which of them. The same seed and counts give
the same schedule; the moments within it are the machine's (timing is not reproducible).

Every command step and check appends `$MP_RUN_DIR $MP_STEP` to `$HOME/soak-steps.log`, so
the checker counts how often each step ran (issue #45: no completed step runs twice).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field, replace
from enum import StrEnum

STEP_LOG = 'echo "$MP_RUN_DIR $MP_STEP" >> "$HOME/soak-steps.log"'


class Kind(StrEnum):
    QUICK = "quick"
    SLOW = "slow"
    FAILING = "failing"  # ends ERROR and halts; an approving MP follows
    APPROVAL = "approval"
    PARALLEL = "agent-parallel"  # four listed tasks, three at once (max_parallel 3)
    PLANNED = "agent-planned"  # Plan: auto, the planner's tasks
    PAUSE = "agent-pause"  # a pause point, answered
    QUESTION = "agent-question"  # the agent asks, a person answers
    CANCEL = "agent-cancel"  # cancelled while its agent works
    USAGE = "agent-usage"  # waits out a usage limit
    DUPLICATE = "duplicate"  # an earlier MP's bytes sent again: no second run


AGENT = {Kind.PARALLEL, Kind.PLANNED, Kind.PAUSE, Kind.QUESTION, Kind.CANCEL, Kind.USAGE}
# Kinds the orchestrator sends alone: their halt (or their cancel) is about them only.
EXCLUSIVE = {Kind.FAILING, Kind.PAUSE, Kind.QUESTION, Kind.CANCEL}
EXPECTS = {
    Kind.FAILING: ("ERROR",),
    Kind.PAUSE: ("ERROR", "COMPLETED"),  # the pause, then the same run after the answer
    Kind.QUESTION: ("ERROR", "COMPLETED"),
    Kind.CANCEL: ("CANCELLED",),
    Kind.DUPLICATE: (),
}

WEIGHTS = {
    Kind.QUICK: 78,
    Kind.SLOW: 4,
    Kind.FAILING: 2,
    Kind.PARALLEL: 3,
    Kind.PLANNED: 3,
    Kind.PAUSE: 1,
    Kind.QUESTION: 1,
    Kind.CANCEL: 1,
    Kind.USAGE: 1,
    Kind.DUPLICATE: 2,
}
FAULT_WEIGHTS = {
    "daemon_kill": 30,
    "agent_kill": 14,
    "remote_down": 16,
    "push_refused": 12,
    "alerts_down": 13,
    "disk_full": 15,
}
HOLD = {  # how long a fault lasts, seconds (uniform)
    "daemon_kill": (0.0, 1.0),  # until the service manager starts it again
    "agent_kill": (0.0, 0.0),
    "remote_down": (1.0, 6.0),
    "push_refused": (1.0, 5.0),
    "alerts_down": (2.0, 10.0),
    "disk_full": (0.3, 2.0),
}
ROUTES = (("orch", 60), ("mcp", 30), ("cli", 10))


@dataclass(frozen=True)
class Job:
    index: int
    kind: Kind
    mp_id: str
    text: str
    route: str
    of: int | None = None  # DUPLICATE: the job whose bytes it sends again

    @property
    def exclusive(self) -> bool:
        return self.kind in EXCLUSIVE

    @property
    def agent(self) -> bool:
        return self.kind in AGENT

    @property
    def expects(self) -> tuple[str, ...]:
        return EXPECTS.get(self.kind, ("COMPLETED",))


@dataclass(frozen=True)
class FaultPlan:
    after: int  # fires after the job of this index was sent
    delay: float  # seconds after that send
    kind: str
    hold: float


@dataclass(frozen=True)
class Schedule:
    seed: int
    jobs: list[Job]
    faults: list[FaultPlan] = field(default_factory=list)


def pick(rng: random.Random, weights: dict | tuple) -> str:
    items = list(weights.items()) if isinstance(weights, dict) else list(weights)
    return rng.choices([k for k, _ in items], [w for _, w in items])[0]


def schedule(seed: int, mps: int, faults: int, *, fault_kinds: set[str] | None = None) -> Schedule:
    """`mps` MPs (every kind at least once when there is room, each route too), then
    `faults` faults spread over them; an agent process is killed only after an agent MP
    was sent."""
    rng = random.Random(seed)
    kinds = [Kind(pick(rng, WEIGHTS)) for _ in range(mps)]
    every = [k for k in WEIGHTS if k != Kind.QUICK]
    if mps >= 2 * len(every):  # room for each kind once, spread over the run
        for n, k in enumerate(every):
            kinds[(n * 2 + 1) * mps // (2 * len(every))] = k
    jobs: list[Job] = []
    for i, kind in enumerate(kinds):
        if kind == Kind.DUPLICATE and not any(j.kind == Kind.QUICK for j in jobs):
            kind = Kind.QUICK
        jobs.append(make_job(rng, i, kind, jobs))
    every_route(jobs)
    return Schedule(seed, jobs, plan_faults(rng, jobs, faults, fault_kinds))


def every_route(jobs: list[Job]) -> None:
    """A route no job took is given to a quick MP that another route's share can spare, so
    a short schedule still sends through all three."""
    for route, _ in ROUTES:
        if any(j.route == route for j in jobs):
            continue
        used = Counter(j.route for j in jobs)
        spare = [j for j in jobs if j.kind == Kind.QUICK and used[j.route] > 1]
        if spare:
            jobs[spare[len(spare) // 2].index] = replace(spare[len(spare) // 2], route=route)


def make_job(rng: random.Random, i: int, kind: Kind, earlier: list[Job]) -> Job:
    mp_id = f"MP-45.{i + 1}"
    route = pick(rng, ROUTES)
    if kind == Kind.DUPLICATE:
        of = rng.choice([j for j in earlier[-30:] if j.kind == Kind.QUICK])
        return Job(i, kind, of.mp_id, of.text, "cli" if rng.random() < 0.5 else "mcp", of=of.index)
    text = TEXTS[kind](rng, mp_id)
    return Job(i, kind, mp_id, text, route)


def plan_faults(rng: random.Random, jobs: list[Job], count: int, kinds: set[str] | None) -> list[FaultPlan]:
    """`count` faults spread evenly over the jobs; every kind once (in a seeded order) when
    there is room, the rest by weight."""
    weights = {k: w for k, w in FAULT_WEIGHTS.items() if kinds is None or k in kinds}
    agent_jobs = [j.index for j in jobs if j.agent and j.kind != Kind.CANCEL]
    if not agent_jobs:
        weights.pop("agent_kill", None)
    if not weights:
        return []
    first = sorted(weights)
    rng.shuffle(first)
    chosen = first[:count] + [pick(rng, weights) for _ in range(count - len(first))]
    out = []
    for n, kind in enumerate(chosen):
        after = min(len(jobs) - 1, (2 * n + 1) * len(jobs) // (2 * count) + rng.randint(-2, 2))
        if kind == "agent_kill":  # strike while an agent works: just after an agent MP is sent
            after = min(agent_jobs, key=lambda i, a=after: abs(i - a))
        lo, hi = HOLD[kind]
        delay = rng.uniform(0.5, 3.0) if kind == "agent_kill" else rng.uniform(0.05, 1.5)
        out.append(FaultPlan(max(0, after), round(delay, 3), kind, round(rng.uniform(lo, hi), 3)))
    return sorted(out, key=lambda f: f.after)


# -- the MPs -----------------------------------------------------------------------------


def quick(rng: random.Random, mp_id: str) -> str:
    slot = rng.randrange(20)  # a few files, rewritten: the tree does not grow with the run
    value = rng.randrange(10**6)
    out = [f"# {mp_id} quick"]
    wrote = rng.random() < 0.5
    if wrote:
        out += ["", f"```file soak/shell/{slot}.txt", str(value), "```"]
    out += ["", "```bash", STEP_LOG, "```"]
    if rng.random() < 0.3:
        check = f"grep -qx {value} soak/shell/{slot}.txt" if wrote else "true"
        out += ["", "## Validate", "", "```bash", STEP_LOG, check, "```"]
    return "\n".join(out) + "\n"


def slow(rng: random.Random, mp_id: str) -> str:
    return f"# {mp_id} slow\n\n```bash\n{STEP_LOG}\nsleep {rng.uniform(1.0, 3.0):.2f}\necho slept\n```\n"


def failing(rng: random.Random, mp_id: str) -> str:
    return f"# {mp_id} fails on purpose\n\n```bash\n{STEP_LOG}\necho 'failing on purpose' >&2\nexit 3\n```\n"


def approval(mp_id: str, approves: str) -> str:
    return f"# {mp_id} approves\nApproves: {approves}\n\n```bash\n{STEP_LOG}\necho approved\n```\n"


def agent_mp(mp_id: str, title: str, items: list[str], checks: list[tuple[str, str]], head: str = "") -> str:
    body = "\n".join(f"{n}. {item}" for n, item in enumerate(items, 1))
    blocks = "\n\n".join(f"```bash\n# {mt}\n{cmd}\n```" for mt, cmd in checks)
    return f"# {mp_id} {title}\nExecutor: agent\n{head}\n{body}\n\n## Validate\n\n{blocks}\n"


def parallel(rng: random.Random, mp_id: str) -> str:
    d = f"soak/{mp_id}"
    items = [f'Write "{c}" to `{d}/{c}.txt`. (after none)' for c in "abc"]
    items.append(f'Write "d" to `{d}/d.txt`. (after MT-001, MT-002, MT-003)')
    checks = [(f"MT-00{n}", f"grep -qx {c} {d}/{c}.txt") for n, c in enumerate("abcd", 1)]
    return agent_mp(mp_id, "parallel", items, checks)


def planned(rng: random.Random, mp_id: str) -> str:
    d = f"soak/{mp_id}"
    n = rng.randint(2, 4)
    names = "abcd"[:n]
    tasks = [
        {
            "id": c,
            "title": f"note {c}",
            "description": f'Write "{c}" to `{d}/{c}.txt`.',
            "depends_on": [] if c != names[-1] or n < 3 else list(names[:-1]),
            "files": [f"{d}/{c}.txt"],
            "checks": [f"check-00{k}"],
        }
        for k, c in enumerate(names, 1)
    ]
    checks = "\n\n".join(f"```bash\ngrep -qx {c} {d}/{c}.txt\n```" for c in names)
    plan = json.dumps({"tasks": tasks}, indent=1)
    goal = f"Write the notes the checks ask for, as this plan says.\n\n```json\n{plan}\n```\n"
    return f"# {mp_id} planned\nExecutor: agent\nPlan: auto\n\n{goal}\n## Validate\n\n{checks}\n"


def pause(rng: random.Random, mp_id: str) -> str:
    d = f"soak/{mp_id}"
    items = [f'Write "p" to `{d}/p.txt`.', f'(pause) Write "q" to `{d}/q.txt`.']
    return agent_mp(mp_id, "pause", items, [("MT-001", f"grep -qx p {d}/p.txt"), ("MT-002", f"grep -qx q {d}/q.txt")])


def question(rng: random.Random, mp_id: str) -> str:
    d = f"soak/{mp_id}"
    return agent_mp(
        mp_id,
        "asks",
        [f'Ask a person first. Write "blue" to `{d}/colour.txt`.'],
        [("MT-001", f"grep -qx blue {d}/colour.txt")],
    )


def cancel(rng: random.Random, mp_id: str) -> str:
    d = f"soak/{mp_id}"
    return agent_mp(
        mp_id, "cancelled", [f'Wait to be cancelled. Write "x" to `{d}/x.txt`.'], [("MT-001", f"test -f {d}/x.txt")]
    )


def usage(rng: random.Random, mp_id: str) -> str:
    d = f"soak/{mp_id}"
    return agent_mp(
        mp_id,
        "limited",
        [f'Hit the usage limit first. Write "u" to `{d}/u.txt`.'],
        [("MT-001", f"grep -qx u {d}/u.txt")],
    )


TEXTS = {
    Kind.QUICK: quick,
    Kind.SLOW: slow,
    Kind.FAILING: failing,
    Kind.PARALLEL: parallel,
    Kind.PLANNED: planned,
    Kind.PAUSE: pause,
    Kind.QUESTION: question,
    Kind.CANCEL: cancel,
    Kind.USAGE: usage,
}
