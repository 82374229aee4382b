"""Control groups (harness/cgroups.py): groups a killed process left behind are reaped, live ones never."""

from __future__ import annotations

import subprocess
import uuid

import pytest

from harness.cgroups import ControlGroup, reap


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
