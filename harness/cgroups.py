"""Control groups for one evaluation: a process-count limit (fork bombs), a memory limit the kernel enforces,
and a complete list of the evaluation's processes to kill, escaped double-forks included.

Uses cgroup v1 `pids` and `memory` hierarchies, or a cgroup v2 unified hierarchy, when writable (root in most
containers). Where neither is, `describe()` says so and the rlimits and the parent's watchdog remain.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


@dataclass
class ControlGroup:
    folders: list[Path] = field(default_factory=list)
    reason: str = ""

    @classmethod
    def create(cls, token: str, memory_mb: int, max_processes: int) -> "ControlGroup":
        name = f"kernelwright-{token[:16]}"
        v1 = {"pids": ("pids.max", str(max_processes)), "memory": ("memory.limit_in_bytes", str(memory_mb << 20))}
        group = cls()
        try:
            if (ROOT / "pids" / "cgroup.procs").exists():
                for controller, (knob, value) in v1.items():
                    folder = ROOT / controller / name
                    folder.mkdir()
                    group.folders.append(folder)
                    (folder / knob).write_text(value)
            elif (ROOT / "cgroup.controllers").exists():
                folder = ROOT / name
                folder.mkdir()
                group.folders.append(folder)
                (folder / "pids.max").write_text(str(max_processes))
                (folder / "memory.max").write_text(str(memory_mb << 20))
            else:
                group.reason = "no cgroup hierarchy found"
        except OSError as exc:
            group.remove()
            group.folders = []
            group.reason = f"cgroups not writable here ({exc.strerror or exc})"
        return group

    def describe(self) -> dict[str, str]:
        if self.folders:
            return {"cgroup": ", ".join(str(f) for f in self.folders)}
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
