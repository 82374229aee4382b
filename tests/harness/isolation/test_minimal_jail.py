"""The minimal jail (issue 36): the jailed process runs as an unprivileged user, sees a /dev of its own with only
the nodes a kernel needs, small private folders, and no other evaluation's scratch folder whichever kernelwright
home it belongs to. Shell commands in the jail (no build, no torch); the honest controls that a candidate still
builds and is accepted are the evaluations in test_jail_contents.py, test_runtime_containment.py and
tests/harness/compilation."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from harness.isolation.jail import DEVICES, JAIL_UID
from harness.isolation.scratch_quota import mount_quota, release
from harness.records import Check
from tests.conftest import REPO
from tests.harness.isolation.jailed import NEEDS_ROOT, jailed

pytestmark = NEEDS_ROOT


@pytest.mark.proves(Check.JAIL_UID)
def test_it_runs_as_an_unprivileged_user_and_root_only_files_stay_closed(tmp_path: Path) -> None:
    """uid 0 without capabilities still owns every root file: a 0600 file of root's beside the harness's code
    (visible, read-only) is readable by it. As `JAIL_UID` it is not; its own folder is its to write."""
    secret = REPO / "harness" / f"root-only-{os.getpid()}.txt"
    secret.write_text("root-only-secret")
    secret.chmod(0o600)
    try:
        log = jailed(tmp_path, f"echo uid=$(id -u); cat {secret} 2>&1; touch mine && echo own-folder-ok")
    finally:
        secret.unlink()
    assert f"uid={JAIL_UID}" in log and JAIL_UID != 0, log
    assert "root-only-secret" not in log and "Permission denied" in log, log
    assert "own-folder-ok" in log and (tmp_path / "work" / "mine").stat().st_uid == JAIL_UID


@pytest.mark.proves(Check.JAIL_BINDS)
def test_only_the_listed_device_nodes_exist_and_private_folders_are_small(tmp_path: Path) -> None:
    """The host's /dev holds the kernel log (world-readable here), disks, terminals: none is in the jail's."""
    host = [n for n in ("kmsg", "ptmx", "tty", "console", "loop0", "tty0", "mem", "sda") if os.path.exists(f"/dev/{n}")]
    assert "kmsg" in host, host  # the attack's target exists on this machine
    opens = "; ".join(f"(head -c 1 /dev/{n} >/dev/null 2>&1 && echo opened-{n})" for n in host)
    log = jailed(tmp_path, f"echo listed: $(ls /dev); {opens}; head -c 8 /dev/urandom | wc -c; "
                            "dd if=/dev/zero of=/tmp/big bs=1M count=100 2>&1 | grep -o 'No space left' | head -1; "
                            "touch /dev/planted 2>/dev/null && echo dev-writable; echo done")
    listed = log.split("listed: ")[1].splitlines()[0].split()
    assert set(listed) <= set(DEVICES) | {"fd", "stdin", "stdout", "stderr", "shm"}, listed
    assert not any(f"opened-{n}" in log for n in host), log
    assert "8\n" in log and "No space left" in log and "dev-writable" not in log and "done" in log, log


@pytest.mark.proves(Check.JAIL_BINDS)
def test_another_homes_scratch_quota_is_out_of_sight(tmp_path: Path) -> None:
    """Another kernelwright home (another user's, another checkout's) in a folder the jail shows read-only: its
    evaluations' scratch folders hold their trials' inputs. Each is a quota (a mount point of its own), hidden
    whatever home it is in."""
    other = REPO / "runs" / f"other-home-{os.getpid()}" / "scratch" / f"eval-20991231-000000-{os.getpid()}-abc123"
    other.mkdir(parents=True)
    try:
        if not mount_quota(other, 1 << 20):
            pytest.skip("tmpfs mounts refused here: no quotas to hide")
        (other / "inputs.pt").write_text("trial inputs")
        log = jailed(tmp_path, f"cat {other}/inputs.pt 2>&1; ls {other.parent}; echo done")
        assert (other / "inputs.pt").read_text() == "trial inputs"  # the host still sees it
    finally:
        release(other)
        shutil.rmtree(REPO / "runs" / f"other-home-{os.getpid()}", ignore_errors=True)
    assert "trial inputs" not in log and "done" in log, log
