"""One timing at a time per device on this machine: builds and correctness checks run in parallel, but two
timed regions never overlap, whether they come from threads (best-of-N), processes (sweep workers) or separate
kernelwright commands. An exclusive `flock` on a per-device file under the kernelwright home; the kernel releases
it when its holder dies, so a killed evaluation never blocks the next."""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from typing import Iterator

from harness.paths import home


@contextmanager
def timing_slot(device: str) -> Iterator[float]:
    """Hold the device's timing slot; yields the seconds spent waiting for it."""
    folder = home().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    fd = os.open(folder / f"timing-{device}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a fresh open file description: threads of one process exclude each other
        yield time.perf_counter() - started
    finally:
        os.close(fd)  # closing releases the lock
