"""One timing at a time per device on this machine: builds and correctness checks run in parallel, but two
timed regions never overlap, whether they come from threads (best-of-N), processes (sweep workers) or separate
kernelwright commands. An exclusive `flock` on a per-device file under the kernelwright home; the kernel releases
it when its holder dies, so a killed evaluation never blocks the next.

On the CPU the measurement also needs the cores to itself. Every build on this machine (a candidate's, a
precompiled header built in the background, another kernelwright command's) runs in a cgroup that a CPU timing
freezes for the length of the measurement and thaws after, so a timing never waits for a 70 s header build and
builds lose only the seconds being measured. The timer holds a machine-wide lock meanwhile: a build whose timer
died (the lock is free, the group still frozen) is thawed by its own process. Builds start under a shared lock that
the timer takes exclusively, so none starts during a measurement; where cgroups cannot freeze, a build holds that
lock for its whole run and a CPU timing waits for it, as before.

This process's own other threads (another evaluation's reference or canaries, computed with torch threads of their
own) cannot be frozen: while a CPU timing runs they are moved off the timing CPUs, and back after.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from harness.isolation.cgroups import TIMED_PREFIX, build_freezers, is_frozen, set_frozen
from harness.paths import home

_COMPILES = "compiles.lock"  # shared by builds while they start (or run, unfreezable), exclusive for a CPU timing
_MACHINE_LOCK = Path(tempfile.gettempdir()) / "kernelwright-cpu-timing.lock"  # held while builds are frozen
_FREEZE_WAIT_S = 5.0


def _timing_lock(device: str) -> str | Path:
    """Machine-wide for a GPU (every kernelwright home on the machine shares its GPUs: a lock per home let two
    evaluations time on one GPU at once), per visible-device set so two GPUs time side by side."""
    if device == "cpu":
        return f"timing-{device}.lock"
    visible = "".join(c for c in os.environ.get("CUDA_VISIBLE_DEVICES", "all") if c.isalnum() or c in ",-")
    return Path(tempfile.gettempdir()) / f"kernelwright-{device}-{visible or 'none'}-timing.lock"


@contextmanager
def _locked(name: str | Path, operation: int) -> Iterator[None]:
    """flock a file under the kernelwright home (a name) or anywhere (a path) for the block."""
    path = name if isinstance(name, Path) else home().resolve() / name
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, operation)  # a fresh open file description: threads of one process exclude each other
        yield
    finally:
        os.close(fd)  # closing releases the lock


_this_thread = threading.local()  # whether this thread holds a CPU timing slot


class BuildDuringTiming(RuntimeError):
    """A child asked for a build while its parent's thread held a CPU timing slot (a candidate can send a build
    request at any moment, e.g. from a thread that outlives `forward`)."""


@dataclass
class Slot:
    waited_s: float = 0.0  # waiting for another timing (or, without freezing, for running builds)
    frozen_builds: int = 0  # builds, and other evaluations' timed children, frozen while this slot was held (CPU)


def timing_cpus(threads: int) -> str:
    """The CPUs every timed child is pinned to, reference and candidate alike: the last `threads` of this process's
    (the timing slot makes them the measurement's alone)."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    return ",".join(str(cpu) for cpu in allowed[-max(1, min(threads, len(allowed))):])


@contextmanager
def timing_slot(device: str, keep: tuple[Path, ...] = (), cpus: str | None = None) -> Iterator[Slot]:
    """Hold the device's timing slot (on the CPU, with every build frozen or finished, and every other
    evaluation's timed children frozen: all of them share the timing CPUs). `keep`: the freezers of the children
    this timing drives itself; `cpus`: the timing CPUs, which this process's other threads leave meanwhile."""
    started = time.perf_counter()
    with _locked(_timing_lock(device), fcntl.LOCK_EX):
        if device != "cpu":
            yield Slot(time.perf_counter() - started)
            return
        with _locked(_COMPILES, fcntl.LOCK_EX), _builds_frozen(keep) as frozen, other_threads_off(cpus):
            _this_thread.timing = True
            try:
                yield Slot(time.perf_counter() - started, frozen)
            finally:
                _this_thread.timing = False


@contextmanager
def _builds_frozen(keep: tuple[Path, ...] = ()) -> Iterator[int]:
    frozen: list[Path] = []
    with _locked(_MACHINE_LOCK, fcntl.LOCK_EX):
        try:
            others = [f for f in build_freezers(TIMED_PREFIX) if f not in keep]  # listed under the lock
            for folder in build_freezers() + others:
                try:
                    set_frozen(folder, True)
                    frozen.append(folder)
                except OSError:
                    continue  # finished meanwhile, or not ours to freeze
            deadline = time.monotonic() + _FREEZE_WAIT_S
            while not all(is_frozen(f, settled=True) for f in frozen) and time.monotonic() < deadline:
                time.sleep(0.001)
            yield len(frozen)
        finally:
            for folder in frozen:
                try:
                    set_frozen(folder, False)
                except OSError:
                    continue


@contextmanager
def other_threads_off(cpus: str | None) -> Iterator[None]:
    """Every other thread of this process off `cpus` (a cpuset list such as "1" or "2,3") for the block, where
    other CPUs remain; threads they start meanwhile inherit that, and every thread gets the CPUs it had back."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield
        return
    allowed = os.sched_getaffinity(0)
    rest = allowed - {int(cpu) for cpu in cpus.split(",")}
    if not rest:  # the timing uses every CPU: nowhere else to go
        yield
        return
    me = threading.get_native_id()
    moved = {tid: pin_thread(tid, rest) for tid in _threads() if tid != me}
    try:
        yield
    finally:
        for tid in _threads():
            if tid != me:
                pin_thread(tid, moved.get(tid) or allowed)


def _threads() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc/self/task")]
    except OSError:
        return []


def pin_thread(tid: int, cpus: set[int]) -> set[int] | None:
    """Pin thread `tid` (a native id) to `cpus`; what it had before, or None where that failed (it ended meanwhile,
    or `cpus` lie outside this process's cpuset)."""
    try:
        before = os.sched_getaffinity(tid)
        os.sched_setaffinity(tid, cpus)
        return before
    except OSError:
        return None


@contextmanager
def checking_slot(device: str) -> Iterator[None]:
    """Held while an evaluation drives its candidate's checked calls by freezing and thawing it outside a timing
    (harness/measurement/frozen_trials.py): shared among checks, excluded by every CPU timing, taken in the timing's
    lock order (so a build the candidate asks for meanwhile still starts). No timing then sees this child run, and no
    timing's end thaws it behind its driver's back."""
    if device != "cpu":
        yield
        return
    with _locked(_COMPILES, fcntl.LOCK_SH), _locked(_MACHINE_LOCK, fcntl.LOCK_SH):
        yield


def timing_abandoned() -> bool:
    """No CPU timing on this machine holds the lock: a build still frozen was left by a timer that died."""
    try:
        with _locked(_MACHINE_LOCK, fcntl.LOCK_SH | fcntl.LOCK_NB):
            return True
    except BlockingIOError:
        return False


def refuse_build_while_timing() -> None:
    """A build asked for by this thread while it holds a CPU timing slot would wait on that very slot (or on a
    compile slot a build it froze holds) forever."""
    if getattr(_this_thread, "timing", False):
        raise BuildDuringTiming("a build was requested while this evaluation's CPU timing held the machine: "
                                "builds wait for timings, so it is refused (build before timing starts)")


@contextmanager
def compiling() -> Iterator[None]:
    """Held while a build starts (and, where it cannot be frozen, while it runs): builds share it, a CPU timing
    holds it exclusively."""
    refuse_build_while_timing()
    with _locked(_COMPILES, fcntl.LOCK_SH):
        yield
