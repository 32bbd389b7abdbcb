"""1. Drop -> RUNNING: from the writer's close()/rename() of the inbox file until
SESSION_STATE.json says RUNNING, in the running daemon with git off.

Baselines, same run, same observer:
- the physical floor: a process blocked on raw inotify that, on the event, writes the
  state file once with fsync + rename + directory fsync (the engine's durability);
- the naive script: a bash loop of `inotifywait -m` and `jq` doing the same protocol.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

from bench.common import (
    PYTHON,
    Daemon,
    Stat,
    StateWatcher,
    engine_env,
    have,
    info_row,
    init_workspace,
    mp_text,
    ratio_row,
    write_mp,
)

# The floor: inotify wake-up, then one durable atomic write; then it "finishes" the MP so
# the next sample starts from an idle state, as the daemon does.
FLOOR = textwrap.dedent(
    """
    import json, os, sys
    sys.path.insert(0, sys.argv[2])
    from bench.common import Inotify, IN_CLOSE_WRITE, IN_MOVED_TO
    root = sys.argv[1]
    inbox, state = os.path.join(root, "Claude_Inbox"), os.path.join(root, "SESSION_STATE.json")
    def put(data):
        tmp = state + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, json.dumps(data).encode()); os.fsync(fd); os.close(fd)
        os.rename(tmp, state)
        d = os.open(root, os.O_RDONLY); os.fsync(d); os.close(d)
    put({"status": "ONLINE", "current": "IDLE"})
    for mask, name in Inotify(inbox, IN_CLOSE_WRITE | IN_MOVED_TO).events():
        if name != "incoming_microproject.txt":
            continue
        path = os.path.join(inbox, name)
        try:
            mp_id = open(path).readline().split()[1]
        except (OSError, IndexError):
            continue
        put({"status": "RUNNING", "current": mp_id})
        os.unlink(path)
        put({"status": "ONLINE", "current": "IDLE", "last_completed": mp_id})
    """
)

BASH_LOOP = textwrap.dedent(
    """
    set -u
    root=$1; cd "$root"
    put() { jq -n "$1" > SESSION_STATE.json.tmp && sync SESSION_STATE.json.tmp && mv SESSION_STATE.json.tmp SESSION_STATE.json; }
    put '{status:"ONLINE",current:"IDLE"}'
    inotifywait -q -m -e close_write,moved_to --format %f Claude_Inbox | while read -r f; do
      [ "$f" = incoming_microproject.txt ] || continue
      id=$(head -n1 Claude_Inbox/$f | cut -d' ' -f2)
      [ -n "$id" ] || continue
      put "{status:\\"RUNNING\\",current:\\"$id\\"}"
      bash -c true
      rm -f Claude_Inbox/$f
      put "{status:\\"ONLINE\\",current:\\"IDLE\\",last_completed:\\"$id\\"}"
    done
    """
)


def _measure(root: Path, how: str, reps: int, tag: str) -> Stat:
    """Drop `reps` MPs into `root`'s inbox; time close/rename -> RUNNING for each."""
    watcher = StateWatcher(root / "SESSION_STATE.json")
    inbox = root / "Claude_Inbox" / "incoming_microproject.txt"
    samples = []
    try:
        for i in range(reps + 2):  # two warm-up drops
            mp_id = f"MP-{tag}{i}.0"
            mark = watcher.mark()
            t0 = write_mp(inbox, mp_text(mp_id), how)
            t1 = watcher.wait(mark, lambda d, m=mp_id: d.get("status") == "RUNNING" and d.get("current") == m)
            watcher.wait(mark, lambda d, m=mp_id: d.get("last_completed") == m and d.get("status") == "ONLINE")
            deadline = time.monotonic() + 30
            while inbox.exists() and time.monotonic() < deadline:
                time.sleep(0.001)
            # The next MP arrives at an idle daemon: let the one that finished close its
            # ledger and events (the same pause for every system measured).
            time.sleep(0.05)
            if i >= 2:
                samples.append(t1 - t0)
    finally:
        watcher.close()
    return Stat.of(samples).scaled(1000)


def _wait_state(root: Path, status: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if json.loads((root / "SESSION_STATE.json").read_text()).get("status") == status:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.01)
    raise TimeoutError(f"{root} never reached {status}")


def run(reps: int) -> list:
    rows = []
    with tempfile.TemporaryDirectory(prefix="mpe-bench-detect-") as d:
        base = Path(d)
        env = engine_env(base)
        results: dict[str, dict[str, Stat]] = {}
        for how in ("direct", "rename"):
            # the floor process
            floor_root = base / f"floor-{how}"
            (floor_root / "Claude_Inbox").mkdir(parents=True)
            floor = subprocess.Popen([PYTHON, "-c", FLOOR, str(floor_root), str(Path(__file__).parent.parent)])
            try:
                _wait_state(floor_root, "ONLINE")
                floor_stat = _measure(floor_root, how, reps, "9")
            finally:
                floor.kill()
                floor.wait()
            # the daemon
            ws = init_workspace(base / f"ws-{how}", env)
            daemon = Daemon(ws, env, base / f"daemon-{how}.log")
            try:
                daemon.wait_online()
                engine_stat = _measure(ws, how, reps, "1")
            finally:
                daemon.stop()
            results[how] = {"floor": floor_stat, "engine": engine_stat}
            # the bash loop
            if have("inotifywait") and have("jq"):
                bash_root = base / f"bash-{how}"
                (bash_root / "Claude_Inbox").mkdir(parents=True)
                loop = subprocess.Popen(["bash", "-c", BASH_LOOP, "bash", str(bash_root)], start_new_session=True)
                try:
                    _wait_state(bash_root, "ONLINE")
                    time.sleep(0.3)  # inotifywait prints nothing when its watch is set up
                    results[how]["bash"] = _measure(bash_root, how, reps, "5")
                finally:
                    subprocess.run(["pkill", "-KILL", "-s", str(loop.pid)], check=False)
                    loop.wait()
        for how, res in results.items():
            rows.append(
                ratio_row(
                    f"1. drop -> RUNNING, {how} write",
                    res["engine"],
                    "raw inotify + fsync'd atomic write",
                    res["floor"],
                    3.0,
                )
            )
            if "bash" in res:
                rows.append(
                    info_row(
                        f"1. drop -> RUNNING, {how} write, vs a bash loop",
                        res["engine"],
                        "inotifywait + jq loop",
                        res["bash"],
                    )
                )
            else:
                rows.append(info_row(f"1. bash loop ({how}): install inotify-tools and jq", res["engine"]))
    return rows
