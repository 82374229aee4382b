"""Control groups (harness/isolation/cgroups.py): groups a killed process left behind are reaped, live ones never."""

from __future__ import annotations

import subprocess
import uuid

import pytest

from harness.isolation.cgroups import ControlGroup, reap


def test_abandoned_empty_groups_are_reaped_and_groups_in_use_are_kept() -> None:
    empty = ControlGroup.create("reaptest" + uuid.uuid4().hex, 64, 8, freezable=True)
    busy = ControlGroup.create("reaptest" + uuid.uuid4().hex, 64, 8)
    if not empty.folders or not busy.folders:
        pytest.skip(f"cgroups not writable here: {empty.reason or busy.reason}")
    sleeper = subprocess.Popen(["sleep", "30"], preexec_fn=busy.join)
    try:
        assert reap(-1.0, "kernelwright-*reaptest*") >= len(empty.folders)  # only this test's groups, all "old"
        assert not any(folder.exists() for folder in empty.folders)
        assert all(folder.exists() for folder in busy.folders) and sleeper.pid in busy.pids()
    finally:
        sleeper.kill()
        sleeper.wait()
        busy.remove()


def test_a_timed_group_is_pinned_and_freezable_and_keeps_its_limits_without_a_cpuset(monkeypatch) -> None:
    from harness.isolation.cgroups import ControlGroup
    import harness.isolation.cgroups as cgroups

    group = ControlGroup.create("pintest" + uuid.uuid4().hex, 64, 8, cpus="0")
    try:
        if not group.folders:
            pytest.skip(f"no cgroups here: {group.reason}")
        assert group.freezer is not None and group.limits_memory()
        if not _cpuset_writable():
            pytest.skip("no writable cpuset controller here: timed children run unpinned (and say so)")
        # where the cpuset can be written, pinning must have happened: the kernel's own affinity shows it
        assert group.cpus == "0" and group.describe()["cpuset"] == "0", group.describe()
        sleeper = subprocess.Popen(["sleep", "30"], preexec_fn=group.join)
        try:
            import psutil

            assert psutil.Process(sleeper.pid).cpu_affinity() == [0]
        finally:
            sleeper.kill()
            sleeper.wait()
    finally:
        group.remove()

    def refused(*_args):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cgroups, "_cpuset", refused)
    unpinned = ControlGroup.create("pintest" + uuid.uuid4().hex, 64, 8, cpus="0")
    try:
        assert unpinned.limits_memory() and unpinned.freezer is not None and unpinned.cpus is None
        assert unpinned.describe()["cpuset"].startswith("none: cpuset not writable")
    finally:
        unpinned.remove()


def _cpuset_writable() -> bool:
    """Read independently of harness/isolation/cgroups.py: a cgroup v1 cpuset hierarchy, or v2's controller."""
    import os
    from pathlib import Path

    v1, v2 = Path("/sys/fs/cgroup/cpuset"), Path("/sys/fs/cgroup/cgroup.controllers")
    if (v1 / "cgroup.procs").exists():
        return os.access(v1, os.W_OK)
    return v2.exists() and "cpuset" in v2.read_text().split() and os.access(v2.parent, os.W_OK)


def test_a_frozen_timed_group_makes_no_progress_until_thawed() -> None:
    """What the timing relies on: while one side is timed, the other side's whole tree is stopped."""
    import sys
    import time

    import psutil

    group = ControlGroup.create("freezetest" + uuid.uuid4().hex, 256, 8, cpus="0")
    if group.freezer is None:
        group.remove()
        pytest.skip(f"no cgroup freezer here: {group.reason}")
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=group.join)
    try:
        time.sleep(0.3)
        group.freeze()
        frozen_at = psutil.Process(spinner.pid).cpu_times().user
        time.sleep(0.3)
        assert psutil.Process(spinner.pid).cpu_times().user == frozen_at
        group.thaw()
        deadline = time.monotonic() + 10  # a loaded machine may give it the CPU late, never not at all
        while psutil.Process(spinner.pid).cpu_times().user <= frozen_at + 0.1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert psutil.Process(spinner.pid).cpu_times().user > frozen_at + 0.1
        if _cpuset_writable():
            assert group.cpus == "0" and psutil.Process(spinner.pid).cpu_affinity() == [0]
    finally:
        group.kill_all()
        spinner.wait()
        group.remove()
