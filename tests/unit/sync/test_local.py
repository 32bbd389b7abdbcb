"""The channel with git off stands in for the real one at every sync point."""

from __future__ import annotations

import inspect

from mp_engine.config.load import load_config
from mp_engine.pipeline.engine import Engine
from mp_engine.sync.channel import GitChannel
from mp_engine.sync.local import LocalChannel


def test_the_engine_talks_to_the_stub_when_git_is_off(ws):
    assert isinstance(Engine.build(ws, load_config(ws.root)).sync, LocalChannel)


def test_the_stub_has_the_real_channels_interface():
    real = {
        n: inspect.signature(f) for n, f in inspect.getmembers(GitChannel, inspect.isfunction) if not n.startswith("_")
    }
    stub = {
        n: inspect.signature(f)
        for n, f in inspect.getmembers(LocalChannel, inspect.isfunction)
        if not n.startswith("_")
    }
    assert set(real) - {"session"} <= set(stub)
    for name in stub:
        assert list(stub[name].parameters) == list(real[name].parameters), name


def test_the_stub_never_polls_and_refuses_nothing():
    c = LocalChannel()
    assert not c.due() and c.next_poll_at() == float("inf")
    assert c.refusal_for(b"# MP-1.0\n") is None
    out = c.publish("MP-1.0: COMPLETED", "r")
    assert not out.integrated and out.problem is None
