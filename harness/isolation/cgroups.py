"""Control groups for one evaluation: a process-count limit (fork bombs), a memory limit the kernel enforces,
and a complete list of the evaluation's processes to kill, escaped double-forks included.

Uses cgroup v1 `pids` and `memory` hierarchies, or a cgroup v2 unified hierarchy, when writable (root in most
containers). Where neither is, `describe()` says so and the rlimits and the parent's watchdog remain.
"""

from __future__ import annotations

import functools
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path("/sys/fs/cgroup")

# a task must run to reach the freezer's stop: on a machine loaded past its cores that took over 5 s once
FREEZE_WAIT_S = 30.0


BUILD_PREFIX = "kernelwright-build-"  # builds' groups: a CPU timing freezes every one on the machine
TIMED_PREFIX = "kernelwright-timed-"  # a timed child's group: frozen by its own timing between its batches


@dataclass
class ControlGroup:
    folders: list[Path] = field(default_factory=list)
    reason: str = ""
    freezer: Path | None = None  # where this group is frozen and thawed (builds and timed children)
    cpus: str | None = None  # the CPUs the kernel lets this group run on (timed children), when set

    @classmethod
    def create(cls, token: str, memory_mb: int, max_processes: int, freezable: bool = False,
               cpus: str | None = None) -> "ControlGroup":
        """`freezable` alone: a build's group (every CPU timing freezes it); with `cpus`: a timed child's group,
        frozen by its own timing and pinned to `cpus` (a list like "1" or "2-3") by the cpuset controller."""
        reap_abandoned()
        prefix = TIMED_PREFIX if cpus else BUILD_PREFIX if freezable else "kernelwright-"
        name = f"{prefix}{token[:16]}"
        v1 = {"pids": ("pids.max", str(max_processes)), "memory": ("memory.limit_in_bytes", str(memory_mb << 20))}
        group = cls()
        try:
            if (ROOT / "pids" / "cgroup.procs").exists():
                for controller, (knob, value) in v1.items():
                    folder = ROOT / controller / name
                    folder.mkdir()
                    group.folders.append(folder)
                    (folder / knob).write_text(value)
                if (freezable or cpus) and (ROOT / "freezer" / "cgroup.procs").exists():
                    group.freezer = ROOT / "freezer" / name
                    group.freezer.mkdir()
                    group.folders.append(group.freezer)
                if cpus and (ROOT / "cpuset" / "cgroup.procs").exists():
                    group._pin(lambda: _cpuset(ROOT / "cpuset", name, cpus), cpus)
            elif (ROOT / "cgroup.controllers").exists():
                folder = ROOT / name
                folder.mkdir()
                group.folders.append(folder)
                (folder / "pids.max").write_text(str(max_processes))
                (folder / "memory.max").write_text(str(memory_mb << 20))
                group.freezer = folder if (freezable or cpus) and (folder / "cgroup.freeze").exists() else None
                if cpus and (folder / "cpuset.cpus").exists():
                    group._pin(lambda: (folder / "cpuset.cpus").write_text(cpus) and None, cpus)
            else:
                group.reason = "no cgroup hierarchy found"
        except OSError as exc:
            group.remove()
            group.folders, group.freezer = [], None
            group.reason = f"cgroups not writable here ({exc.strerror or exc})"
        return group

    def _pin(self, make: Callable[[], Path | None], cpus: str) -> None:
        """The cpuset is worth having, not worth losing the other limits over: where it cannot be written the
        group goes on unpinned (`describe()` says so) and the timing still freezes the other side."""
        try:
            folder = make()
        except OSError as exc:
            self.reason = f"cpuset not writable here ({exc.strerror or exc})"
            return
        if folder is not None:
            self.folders.append(folder)
        self.cpus = cpus

    def limits_memory(self) -> bool:
        """Whether the kernel limits this group's memory (then no address-space rlimit is needed)."""
        return any((f / "memory.limit_in_bytes").exists() or (f / "memory.max").exists() for f in self.folders)

    def frozen(self) -> bool:
        return self.freezer is not None and is_frozen(self.freezer)

    def thaw(self) -> None:
        if self.freezer is not None:
            try:
                set_frozen(self.freezer, False)
            except OSError:
                pass

    def freeze(self) -> None:
        """Stop every task of the group and wait until they are all stopped (about 0.2 ms for an idle child)."""
        if self.freezer is None:
            return
        set_frozen(self.freezer, True)
        deadline = time.monotonic() + FREEZE_WAIT_S
        while not is_frozen(self.freezer, settled=True):
            if time.monotonic() > deadline:
                raise OSError(f"{self.freezer} did not freeze within {FREEZE_WAIT_S:g} s")
            time.sleep(0)

    def describe(self) -> dict[str, str]:
        if self.folders:
            return {"cgroup": ", ".join(str(f) for f in self.folders),
                    **({"cpuset": self.cpus} if self.cpus else {"cpuset": f"none: {self.reason}"} if self.reason
                       else {})}
        return {"cgroup": f"none: {self.reason}; process count not limited, rlimits and watchdog only"}

    def join(self) -> None:
        """Runs in the child between fork and exec: move this process into every folder."""
        for folder in self.folders:
            (folder / "cgroup.procs").write_text(str(os.getpid()))

    def pids(self) -> set[int]:
        found: set[int] = set()
        for folder in self.folders:
            try:
                found |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
            except (OSError, ValueError):
                continue
        return found

    def kill_all(self) -> list[int]:
        killed: list[int] = []
        for _ in range(50):  # a fork bomb refills: sweep until empty (pids.max bounds each sweep)
            self.thaw()  # a frozen process (cgroup v1) dies only once thawed
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except OSError:
                    continue
            time.sleep(0.02)
        return killed

    def hit_memory_limit(self) -> bool:
        for folder in self.folders:
            for knob in ("memory.failcnt", "memory.events"):
                try:
                    text = (folder / knob).read_text()
                except OSError:
                    continue
                if knob == "memory.failcnt" and int(text.strip() or 0) > 0:
                    return True
                if knob == "memory.events" and any(line.startswith("oom_kill ") and not line.endswith(" 0")
                                                   for line in text.splitlines()):
                    return True
        return False

    def remove(self) -> None:
        for folder in self.folders:
            for _ in range(20):
                try:
                    folder.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)


def _cpuset(hierarchy: Path, name: str, cpus: str) -> Path:
    """A cgroup v1 cpuset: its memory nodes copied from the root (a cpuset without them takes no task)."""
    folder = hierarchy / name
    folder.mkdir()
    try:
        (folder / "cpuset.mems").write_text((hierarchy / "cpuset.mems").read_text().strip())
        (folder / "cpuset.cpus").write_text(cpus)
    except OSError:
        folder.rmdir()
        raise
    return folder


def build_freezers(prefix: str = BUILD_PREFIX) -> list[Path]:
    """Every build's freezer on this machine (any kernelwright process's); with TIMED_PREFIX, every timed child's."""
    v1 = ROOT / "freezer"
    return sorted((v1 if (v1 / "cgroup.procs").exists() else ROOT).glob(f"{prefix}*"))


def set_frozen(folder: Path, frozen: bool) -> None:
    """Freeze or thaw a group; one that is gone meanwhile (its process ended: another command's, often) has nothing
    left to freeze or thaw."""
    try:
        if (folder / "freezer.state").exists():
            (folder / "freezer.state").write_text("FROZEN" if frozen else "THAWED")
        else:
            (folder / "cgroup.freeze").write_text("1" if frozen else "0")
    except FileNotFoundError:
        return


def is_frozen(folder: Path, settled: bool = False) -> bool:
    """Asked to freeze (v1 FREEZING or FROZEN, v2 `cgroup.freeze` 1), or with `settled`, every task stopped (a
    group that is gone has nothing left to run)."""
    try:
        if (folder / "freezer.state").exists():
            state = (folder / "freezer.state").read_text().strip()
            return state == "FROZEN" if settled else state in ("FROZEN", "FREEZING")
        if settled:
            return "frozen 1" in (folder / "cgroup.events").read_text()
        return (folder / "cgroup.freeze").read_text().strip() == "1"
    except OSError:
        return settled


@functools.cache
def builds_freezable() -> bool:
    """Whether a build's cgroup can be frozen on this machine (then a CPU timing need not wait for builds)."""
    group = ControlGroup.create(f"probe{os.getpid()}{time.monotonic_ns()}", 64, 8, freezable=True)
    try:
        return group.freezer is not None
    finally:
        group.remove()


ABANDONED_AFTER_S = 3600.0


@functools.cache
def reap_abandoned() -> int:
    """Remove empty kernelwright groups older than an hour, once per process: a process killed before it removed
    its groups leaves them behind (every timing would freeze the builds' ones again). A group still in use has
    processes (rmdir refuses it) or is younger: its process exits and it is removed within seconds."""
    return reap(ABANDONED_AFTER_S)


def reap(older_than_s: float, pattern: str = "kernelwright-*") -> int:
    removed = 0
    now = time.time()
    for hierarchy in [ROOT, *(p for p in ROOT.iterdir() if p.is_dir())] if ROOT.is_dir() else []:
        for folder in hierarchy.glob(pattern):
            try:
                if now - folder.stat().st_mtime > older_than_s and not (folder / "cgroup.procs").read_text().strip():
                    folder.rmdir()
                    removed += 1
            except OSError:
                continue
    return removed
