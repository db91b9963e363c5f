"""Configuration: context nesting, the environment variable, invalid values."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import nadaraya
from nadaraya import NadarayaError
from nadaraya._config import Config, block_elements


def _in_fresh_thread(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a new thread (whose configuration starts from the environment)."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = fn()
        except Exception as exc:  # handed back to the caller
            result["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NADARAYA_WORKING_MEMORY", raising=False)


def test_defaults() -> None:
    config = _in_fresh_thread(nadaraya.get_config)
    assert config == Config()
    assert config.working_memory > 0 and config.key_block >= 1 and config.query_block >= 1


def test_context_nesting_restores() -> None:
    before = nadaraya.get_config()
    with nadaraya.config_context(working_memory=32) as outer:
        assert outer.working_memory == 32 and nadaraya.get_config() is outer
        with nadaraya.config_context(key_block=7, query_block=5) as inner:
            assert inner == Config(working_memory=32, key_block=7, query_block=5)
            assert nadaraya.get_config() == inner
        assert nadaraya.get_config() == outer
        with pytest.raises(RuntimeError), nadaraya.config_context(working_memory=1):
            raise RuntimeError("restored on the way out")
        assert nadaraya.get_config() == outer
    assert nadaraya.get_config() == before


def test_context_is_per_thread() -> None:
    with nadaraya.config_context(working_memory=3):
        other = _in_fresh_thread(nadaraya.get_config)
        assert other.working_memory == Config().working_memory
        assert nadaraya.get_config().working_memory == 3


def test_set_config_changes_this_thread() -> None:
    before = nadaraya.get_config()

    def change() -> tuple[Config, Config]:
        nadaraya.set_config(working_memory=12, key_block=100)
        return nadaraya.get_config(), _in_fresh_thread(nadaraya.get_config)

    mine, fresh = _in_fresh_thread(change)
    assert mine.working_memory == 12 and mine.key_block == 100
    assert fresh == Config()
    assert nadaraya.get_config() == before


def test_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NADARAYA_WORKING_MEMORY", "48.5")
    assert _in_fresh_thread(nadaraya.get_config).working_memory == 48.5

    def inside() -> float:
        with nadaraya.config_context(working_memory=2):
            assert nadaraya.get_config().working_memory == 2
        return nadaraya.get_config().working_memory

    assert _in_fresh_thread(inside) == 48.5


@pytest.mark.parametrize("raw", ["lots", "", "0", "-5", "nan", "inf"])
def test_invalid_environment_variable(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("NADARAYA_WORKING_MEMORY", raw)
    with pytest.raises(NadarayaError, match="NADARAYA_WORKING_MEMORY must be a positive number"):
        _in_fresh_thread(nadaraya.get_config)


@pytest.mark.parametrize("changes, match", [
    ({"working_memory": 0}, "working_memory must be a positive finite number"),
    ({"working_memory": -1.0}, "working_memory must be a positive finite number"),
    ({"working_memory": float("nan")}, "working_memory must be a positive finite number"),
    ({"working_memory": float("inf")}, "working_memory must be a positive finite number"),
    ({"working_memory": "64"}, "working_memory must be a positive finite number"),
    ({"working_memory": True}, "working_memory must be a positive finite number"),
    ({"key_block": 0}, "key_block must be a positive integer"),
    ({"key_block": 2.5}, "key_block must be a positive integer"),
    ({"query_block": -3}, "query_block must be a positive integer"),
    ({"query_block": None}, "query_block must be a positive integer"),
    ({"memory": 3}, r"unknown configuration key\(s\) \['memory'\]"),
])
def test_invalid_values_raise_and_change_nothing(changes: dict[str, Any], match: str) -> None:
    before = nadaraya.get_config()
    with pytest.raises(NadarayaError, match=match), nadaraya.config_context(**changes):
        pass
    with pytest.raises(NadarayaError, match=match):
        nadaraya.set_config(**changes)
    assert nadaraya.get_config() == before


def test_numpy_numbers_are_accepted() -> None:
    with nadaraya.config_context(working_memory=np.float32(8), key_block=np.int64(16)) as cfg:
        assert cfg.key_block == 16
        x = np.linspace(0, 1, 40)
        np.testing.assert_allclose(nadaraya.smooth(x, x, x, bandwidth=0.1, engine="streamed"),
                                   nadaraya.smooth(x, x, x, bandwidth=0.1, engine="dense"))


def test_block_elements_follow_the_budget() -> None:
    with nadaraya.config_context(working_memory=1):
        assert block_elements(8, buffers=2) == 2**20 // 16
    with nadaraya.config_context(working_memory=1e-9):
        assert block_elements(8) == 1
