"""One timing at a time per device on this machine: builds and correctness checks run in parallel, but two
timed regions never overlap, whether they come from threads (best-of-N), processes (sweep workers) or separate
kernelwright commands. An exclusive `flock` on a per-device file under the kernelwright home; the kernel releases
it when its holder dies, so a killed evaluation never blocks the next.

On the CPU the measurement also needs the cores to itself: every compile on this machine (a candidate's build, a
precompiled header built in the background, another kernelwright command's builds) holds a shared lock on one
file, and a CPU timing takes it exclusively, so it starts once running compiles end and none starts meanwhile."""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from typing import Iterator

from harness.paths import home

_COMPILES = "compiles.lock"  # shared by every compile on the machine, exclusive for a CPU timing


@contextmanager
def _locked(name: str, operation: int) -> Iterator[None]:
    folder = home().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / name, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, operation)  # a fresh open file description: threads of one process exclude each other
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextmanager
def timing_slot(device: str) -> Iterator[float]:
    """Hold the device's timing slot (on the CPU, with no compile running); yields the seconds spent waiting."""
    started = time.perf_counter()
    with _locked(f"timing-{device}.lock", fcntl.LOCK_EX):
        if device != "cpu":
            yield time.perf_counter() - started
            return
        with _locked(_COMPILES, fcntl.LOCK_EX):
            yield time.perf_counter() - started


@contextmanager
def compiling() -> Iterator[None]:
    """Held around every compiler run: compiles share it; a CPU timing waits for them and holds them off."""
    with _locked(_COMPILES, fcntl.LOCK_SH):
        yield

