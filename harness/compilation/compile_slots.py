"""How many compilers run at once on this machine: one per core, and no more than memory allows (2 GB per GCC
build, 4.5 GB per compile-only nvcc build). The same number sizes an executor's workers and a machine-wide pool
of compile slots that every compiler takes for its run: a candidate's build, a precompiled header built in the
background, another kernelwright command's build.

Why a pool beside the workers: a header build is a compiler no worker accounts for. Measured on 2 cores, a first
sweep with 2 workers ran 3 GCC builds at once (2 candidates and the header): 77 s per candidate build and 101 s
for the header, where one per core takes 36 s and 45 s.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import psutil

_GB_PER_BUILD = {"cuda-compile-only": 4.5}  # nvcc's front end peaked at 2.96 GB on torch/extension.h (ReLU),
#                                             beside the host check's 1.4 GB
_GB_PER_NATIVE_BUILD = 2.0  # GCC 12 -O3 peaked at 1.44 GB with the precompiled header, 1.54 GB without
_SLOTS = Path(tempfile.gettempdir())  # machine-wide, like the CPU timing lock: cores are the machine's
_POLL_S = 0.2


def default_workers(device: str = "cpu") -> int:
    """One build per core, and no more than memory allows for that device's builds (2 GB each, 4.5 GB for
    compile-only CUDA), leaving room for the children."""
    memory_gb = psutil.virtual_memory().total / 2**30
    per_build = _GB_PER_BUILD.get(device, _GB_PER_NATIVE_BUILD)
    return max(1, min(os.cpu_count() or 1, int(memory_gb // per_build)))


def slot_count(device: str) -> int:
    """`KERNELWRIGHT_COMPILE_SLOTS` where set (a machine shared with other work), else `default_workers`."""
    configured = os.environ.get("KERNELWRIGHT_COMPILE_SLOTS", "")
    return max(1, int(configured)) if configured.isdigit() else default_workers(device)


@contextmanager
def compile_slot(device: str) -> Iterator[float]:
    """Hold one of the machine's compile slots for the block; yields the seconds spent waiting for it. The
    kernel frees a slot whose holder dies."""
    began = time.monotonic()
    count = slot_count(device)
    while True:
        for index in range(count):
            fd = os.open(_SLOTS / f"kernelwright-compile-slot-{index}.lock", os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # an open file description of its own per holder
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield time.monotonic() - began
            finally:
                os.close(fd)
            return
        time.sleep(_POLL_S)
