"""The configuration read by `status`: validated once per version of the file and the
MP_ENGINE_* variables, then read from the cache."""

from __future__ import annotations

import json

from mp_engine.config import cache as config_cache
from mp_engine.config.load import load_config


def test_the_first_read_validates_and_later_reads_use_the_cache(ws):
    data, error = config_cache.read(ws.root, ws.local_dir, {})
    assert error is None and data == load_config(ws.root, {}).model_dump(mode="json")
    cache = ws.local_dir / config_cache.CACHE_FILE
    doc = json.loads(cache.read_text())
    doc["config"]["engine"]["poll_interval"] = 99.0  # what a later read returns proves it read the cache
    cache.write_text(json.dumps(doc))
    assert config_cache.read(ws.root, ws.local_dir, {})[0]["engine"]["poll_interval"] == 99.0


def test_a_changed_file_or_variable_is_validated_again_and_an_error_names_the_key(ws):
    config_cache.read(ws.root, ws.local_dir, {})
    text = ws.config_file.read_text()
    ws.config_file.write_text(text.replace("step_timeout = 600.0", "step_timout = 60.0"))
    data, error = config_cache.read(ws.root, ws.local_dir, {})
    assert "step_timout" in error and data["execution"]["step_timeout"] == 600.0  # the defaults stand in
    assert config_cache.read(ws.root, ws.local_dir, {})[1] == error  # cached, error and all
    ws.config_file.write_text(text)
    data, error = config_cache.read(ws.root, ws.local_dir, {"MP_ENGINE_EXECUTION__STEP_TIMEOUT": "42"})
    assert error is None and data["execution"]["step_timeout"] == 42.0


def test_an_unwritable_cache_still_answers(ws, tmp_path):
    data, error = config_cache.read(ws.root, tmp_path / "missing" / "dir", {})
    assert error is None and data["git"]["enabled"] is False
