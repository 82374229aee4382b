"""The timing gate: on the CPU, timing runs alone while compiles wait; on a GPU compiles go on.
Threads are coordinated with events, so the assertions do not depend on scheduling luck."""

from __future__ import annotations

import threading
import time

from harness.execution.executor import TimingGate


def test_gpu_timing_does_not_wait_for_compiles() -> None:
    gate, inside, timed = TimingGate(exclusive_with_compiles=False), threading.Event(), threading.Event()
    seen: list[bool] = []

    def compile_job() -> None:
        with gate.compile():
            inside.set()
            seen.append(timed.wait(5))  # True only if timing ran while this compile was still inside

    worker = threading.Thread(target=compile_job)
    worker.start()
    assert inside.wait(5)
    with gate.time():
        timed.set()
    worker.join(10)
    assert seen == [True] and not worker.is_alive()


def test_cpu_timing_waits_for_compiles_and_blocks_new_ones() -> None:
    gate, inside, timing_entered = TimingGate(exclusive_with_compiles=True), threading.Event(), threading.Event()
    stamps: dict[str, float] = {}

    def first_compile() -> None:
        with gate.compile():
            inside.set()
            time.sleep(0.3)
            stamps["compile_done"] = time.monotonic()

    def timing() -> None:
        with gate.time():
            stamps["timing_start"] = time.monotonic()
            timing_entered.set()
            time.sleep(0.3)
            stamps["timing_done"] = time.monotonic()

    def late_compile() -> None:
        timing_entered.wait(5)
        with gate.compile():
            stamps["late_compile_start"] = time.monotonic()

    threads = [threading.Thread(target=first_compile), threading.Thread(target=timing),
               threading.Thread(target=late_compile)]
    threads[0].start()
    assert inside.wait(5)
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert stamps["timing_start"] >= stamps["compile_done"]
    assert stamps["late_compile_start"] >= stamps["timing_done"]
