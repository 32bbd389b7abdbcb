"""SIGTERM and SIGINT in-process: the first asks to stop after the step, the second now.

The handlers only count and hand over to a thread, so a signal arriving while the loop
holds a lock (or sits in `Event.wait`) cannot deadlock it."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from mp_engine.config.load import load_config
from mp_engine.daemon.signals import install_signal_handlers, join
from mp_engine.pipeline.engine import Engine
from tests.conftest import events, wait_for


@pytest.fixture
def restore_handlers():
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def test_first_signal_stops_after_the_step_second_stops_now(ws, restore_handlers):
    engine = Engine(ws, load_config(ws.root))
    wake = threading.Event()
    emitters = install_signal_handlers(engine, wake)
    os.kill(os.getpid(), signal.SIGTERM)
    wait_for(lambda: engine.stop.is_set() and wake.is_set(), what="the stop request")
    assert not engine.stop_now.is_set()
    os.kill(os.getpid(), signal.SIGINT)
    wait_for(lambda: engine.stop_now.is_set(), what="the urgent stop")
    join(emitters)
    modes = [(e["signal"], e["mode"]) for e in events(ws, "stop_requested")]
    assert modes == [("SIGTERM", "after current step"), ("SIGINT", "now")]
