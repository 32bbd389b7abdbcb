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


def _drop_once(root: Path, watcher: StateWatcher, how: str, mp_id: str) -> float:
    """Drop one MP into `root`'s inbox; seconds from close/rename to RUNNING."""
    inbox = root / "Claude_Inbox" / "incoming_microproject.txt"
    mark = watcher.mark()
    t0 = write_mp(inbox, mp_text(mp_id), how)
    t1 = watcher.wait(mark, lambda d: d.get("status") == "RUNNING" and d.get("current") == mp_id)
    watcher.wait(mark, lambda d: d.get("last_completed") == mp_id and d.get("status") == "ONLINE")
    deadline = time.monotonic() + 30
    while inbox.exists() and time.monotonic() < deadline:
        time.sleep(0.001)
    # The next MP arrives at an idle system: let the one that finished close its ledger
    # and events (the same pause for every system measured).
    time.sleep(0.05)
    return t1 - t0


def _measure(roots: dict[str, Path], how: str, reps: int) -> dict[str, Stat]:
    """Round-robin over the systems (all running, the others idle): one drop each per
    round, so the machine's drift hits every system alike. Two warm-up rounds."""
    watchers = {name: StateWatcher(root / "SESSION_STATE.json") for name, root in roots.items()}
    samples: dict[str, list[float]] = {name: [] for name in roots}
    try:
        for i in range(reps + 2):
            for n, (name, root) in enumerate(roots.items()):
                elapsed = _drop_once(root, watchers[name], how, f"MP-{n}{i}.0")
                if i >= 2:
                    samples[name].append(elapsed)
    finally:
        for w in watchers.values():
            w.close()
    return {name: Stat.of(v).scaled(1000) for name, v in samples.items()}


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
            roots: dict[str, Path] = {}
            procs: list[subprocess.Popen] = []
            daemon = None
            try:
                # the floor process
                roots["floor"] = base / f"floor-{how}"
                (roots["floor"] / "Claude_Inbox").mkdir(parents=True)
                procs.append(
                    subprocess.Popen(
                        [PYTHON, "-c", FLOOR, str(roots["floor"]), str(Path(__file__).parent.parent)],
                        start_new_session=True,
                    )
                )
                _wait_state(roots["floor"], "ONLINE")
                # the daemon
                roots["engine"] = init_workspace(base / f"ws-{how}", env)
                daemon = Daemon(roots["engine"], env, base / f"daemon-{how}.log")
                daemon.wait_online()
                # the bash loop
                if have("inotifywait") and have("jq"):
                    roots["bash"] = base / f"bash-{how}"
                    (roots["bash"] / "Claude_Inbox").mkdir(parents=True)
                    procs.append(
                        subprocess.Popen(["bash", "-c", BASH_LOOP, "bash", str(roots["bash"])], start_new_session=True)
                    )
                    _wait_state(roots["bash"], "ONLINE")
                    time.sleep(0.3)  # inotifywait prints nothing when its watch is set up
                results[how] = _measure(roots, how, reps)
            finally:
                if daemon is not None:
                    daemon.stop()
                for proc in procs:
                    subprocess.run(["pkill", "-KILL", "-s", str(proc.pid)], check=False)
                    proc.kill()
                    proc.wait()
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
