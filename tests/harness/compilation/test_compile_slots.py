"""The machine's compile slots: as many compilers at once as cores and memory allow, header builds included."""

from __future__ import annotations

import collections
import threading
import time
from pathlib import Path

import psutil
import pytest

from harness.compilation import compile_slots
from harness.compilation.compile_slots import compile_slot, default_workers
from harness.compilation.pch import PrecompiledHeaders
from harness.isolation.sandbox import Limits


@pytest.fixture
def one_slot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One slot, in a folder of the test's own (the real ones are machine-wide)."""
    monkeypatch.setattr(compile_slots, "_SLOTS", tmp_path)
    monkeypatch.setenv("KERNELWRIGHT_COMPILE_SLOTS", "1")
    return tmp_path


def test_default_workers_fit_cores_and_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    memory = collections.namedtuple("memory", "total")
    for cores, gigabytes, expected in ((2, 24, 2), (16, 8, 4), (8, 1, 1), (1, 128, 1)):
        monkeypatch.setattr("os.cpu_count", lambda cores=cores: cores)
        monkeypatch.setattr(psutil, "virtual_memory", lambda gigabytes=gigabytes: memory(gigabytes * 2**30))
        assert default_workers() == expected, (cores, gigabytes)
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    monkeypatch.setattr(psutil, "virtual_memory", lambda: memory(32 * 2**30))
    assert default_workers("cpu") == 16 and default_workers("cuda-compile-only") == 7  # nvcc builds need more


def test_a_compiler_waits_for_a_free_slot(one_slot: Path) -> None:
    order: list[str] = []
    holding = threading.Event()

    def first() -> None:
        with compile_slot("cpu"):
            order.append("first in")
            holding.set()
            time.sleep(0.6)
            order.append("first out")

    thread = threading.Thread(target=first)
    thread.start()
    holding.wait(5)
    with compile_slot("cpu") as waited_s:
        order.append("second in")
    thread.join()
    assert order == ["first in", "first out", "second in"] and waited_s > 0.3


def test_a_header_build_waiting_for_a_slot_does_not_count_as_started(one_slot: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    headers = PrecompiledHeaders(tmp_path / "cache", Limits(60, 4096, False))
    seen_started: list[float | None] = []
    monkeypatch.setattr(PrecompiledHeaders, "_build_locked",
                        lambda self, key, cflags: seen_started.append(self._build_started(key)))
    with compile_slot("cpu"):  # every slot is taken: the header build queues
        thread = threading.Thread(target=headers.build, args=("-O3",))
        thread.start()
        time.sleep(0.5)
        assert thread.is_alive() and headers.header_wait_s("-O3") is None  # nothing to wait for yet
    thread.join(10)
    assert seen_started and seen_started[0] is not None  # once it has a slot, it has started
    assert headers._build_started(headers.key("-O3")) is None  # and after it, nothing is being built
