"""The timing gate: on the CPU, timing runs alone while compiles wait; on a GPU compiles go on."""

from __future__ import annotations

import threading
import time

from sweeps.executor import _TimingGate, default_workers


def _overlaps(exclusive: bool) -> bool:
    gate, log, lock = _TimingGate(exclusive), [], threading.Lock()

    def compile_job() -> None:
        with gate.compile():
            with lock:
                log.append("compile+")
            time.sleep(0.2)
            with lock:
                log.append("compile-")

    def timing_job() -> None:
        time.sleep(0.05)
        with gate.time():
            with lock:
                log.append("time+")
            time.sleep(0.2)
            with lock:
                log.append("time-")

    threads = [threading.Thread(target=compile_job), threading.Thread(target=timing_job)]
    late_compile = threading.Thread(target=lambda: (time.sleep(0.1), compile_job()))
    for t in [*threads, late_compile]:
        t.start()
    for t in [*threads, late_compile]:
        t.join()
    start, end = log.index("time+"), log.index("time-")
    return any(entry.startswith("compile") for entry in log[start:end])


def test_cpu_timing_never_overlaps_a_compile() -> None:
    assert not _overlaps(exclusive=True)


def test_gpu_compiles_continue_during_timing() -> None:
    assert _overlaps(exclusive=False)


def test_default_workers_fit_cores_and_memory() -> None:
    assert 1 <= default_workers()
