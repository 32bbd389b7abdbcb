"""A step that fills the disk: the MP ends in one ERROR result saying so, the step is not
run again by itself, and the engine lives on (issue #19). The workspace sits on a small
tmpfs the test mounts (root only; skipped with the reason elsewhere)."""

from __future__ import annotations

import subprocess

import pytest

from mp_engine.config.load import load_config
from mp_engine.core.workspace import init_workspace
from mp_engine.pipeline.engine import Engine
from mp_engine.views.status import status_report
from tests.conftest import drop, events, read_state, result_field

FILL = "# MP-21.1 Fills the disk\n\n```bash\necho ran >> count.txt\nhead -c 20000000 /dev/zero > fill || true\n```\n"


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({proc.stderr.strip() or 'not root'})")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_step_that_fills_the_disk_ends_in_a_disk_full_result_and_is_not_rerun(small_disk, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    ws, _ = init_workspace(small_disk / "ws")
    engine = Engine(ws, load_config(ws.root))
    engine.start(daemon=False)
    assert (ws.local_dir / "reserve").stat().st_size == 1024 * 1024
    drop(ws, FILL)
    result = engine.tick()
    assert result.action == "error"
    assert result_field(ws, "Error-Kind") == "disk_full"
    assert f"no space left on {small_disk}" in ws.result_file.read_text()
    assert events(ws, "disk_full")[-1]["reserve_freed"] == 1024 * 1024
    assert read_state(ws)["halt"]["mp_id"] == "MP-21.1"
    assert engine.tick().action in ("idle", "halted")  # alive, and nothing re-ran
    assert (ws.root / "count.txt").read_text() == "ran\n"
    assert "no space left" in status_report(ws, load_config(ws.root))["last_error"]["message"]

    (ws.root / "fill").unlink()  # the operator frees space and approves
    drop(ws, "# MP-21.2 Room again\nApproves: MP-21.1\n\n```bash\necho ok\n```\n")
    assert engine.tick().action == "completed"
    assert (ws.local_dir / "reserve").stat().st_size == 1024 * 1024  # refilled
