"""The jail every untrusted process runs in, tried as an attacker would (shell commands: no build, no torch)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from harness.isolation.session import run_jailed
from harness.paths import scratch_root
from harness.records import Check
from tests.conftest import REPO
from tests.harness.isolation.jailed import LIMITS, NEEDS_ROOT, jailed

pytestmark = NEEDS_ROOT


@pytest.mark.proves(Check.JAIL_BINDS)
def test_only_its_own_folder_is_writable_so_the_store_and_build_cache_are_out_of_reach(tmp_path: Path) -> None:
    store = REPO / "harness" / f"store-{os.getpid()}.db"  # beside the harness's code: visible, read-only
    store.write_text("rows")
    try:
        log = jailed(tmp_path, f"echo forged >> {store}; touch {store.parent}/planted.so; touch ok && echo own-folder-ok")
        assert store.read_text() == "rows" and not store.with_name("planted.so").exists()
        assert "own-folder-ok" in log and "Read-only file system" in log
    finally:
        store.unlink()


@pytest.mark.proves(Check.JAIL_BINDS)
def test_other_scratch_folders_are_out_of_sight(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference's scratch folder (every trial's inputs) and other evaluations' lie beside the candidate's under
    the scratch root, in the checkout's runs/ by default, which the jail otherwise shows read-only."""
    home = REPO / "runs" / f"test-home-{os.getpid()}"
    monkeypatch.setenv("KERNELWRIGHT_HOME", str(home))
    try:
        reference, own = scratch_root() / "eval-reference", scratch_root() / "eval-candidate"
        reference.mkdir(parents=True)
        own.mkdir()
        (reference / "inputs.pt").write_text("trial inputs")
        run_jailed(["sh", "-c", f"echo listed: $(ls {scratch_root()}); cat {reference}/inputs.pt; "
                                "cat ../eval-reference/inputs.pt; touch mine && echo own-folder-ok"], own, LIMITS)
        log = (own / "process.log").read_text()
        assert "trial inputs" not in log
        assert "listed: eval-candidate\n" in log and "own-folder-ok" in log
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_files_in_home_folders_and_tmp_are_out_of_sight(tmp_path: Path) -> None:
    """Credentials in a home folder (~/.netrc) and files of other programs in /tmp: the jail covers both with
    empty private folders, and only what the child needs (the interpreter, the project) comes back."""
    home = Path(os.path.expanduser("~"))
    secret = home / f".kernelwright-test-secret-{os.getpid()}"
    secret.write_text("sk-must-not-leak")
    beside = tmp_path / "other-program.txt"
    beside.write_text("sk-must-not-leak")
    try:
        log = jailed(tmp_path, f"cat {secret} {beside} 2>&1; ls {home} | wc -l; echo done")
    finally:
        secret.unlink()
    assert "sk-must-not-leak" not in log and "done" in log


def test_no_host_process_or_its_secrets_are_visible(tmp_path: Path) -> None:
    """A host process started with a secret in its environment (an agent run with its API key): the host reads it
    from /proc/<pid>/environ, the jailed process finds neither that process nor the secret anywhere in its /proc.
    (A variable set in the test process after it started never reaches its /proc/<pid>/environ: it would prove
    nothing.)"""
    import subprocess

    holder = subprocess.Popen(["sleep", "60"], env={**os.environ, "OPENAI_API_KEY": "sk-host-secret"})
    try:
        deadline = time.monotonic() + 10  # until its exec is done and /proc shows its environment
        while b"sk-host-secret" not in Path(f"/proc/{holder.pid}/environ").read_bytes():
            assert time.monotonic() < deadline, "the planted secret never showed in the host's /proc"
            time.sleep(0.02)
        log = jailed(tmp_path, f"cat /proc/{holder.pid}/environ 2>/dev/null | grep -c host-secret; "
                                "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c host-secret; "
                                f"test -e /proc/{holder.pid}/environ && echo holder-visible; "
                                "echo pids $(ls /proc | grep -c '^[0-9]'); grep CapEff /proc/self/status")
    finally:
        holder.kill()
        holder.wait()
    lines = log.splitlines()
    assert lines[0].strip() == "0" and lines[1].strip() == "0" and "holder-visible" not in log, log
    assert int(log.split("pids ")[1].split()[0]) <= 4  # the shell, its pipeline: nothing of the host
    assert "CapEff:\t0000000000000000" in log


def test_a_double_forked_escapee_dies_with_the_evaluation(tmp_path: Path) -> None:
    marker = "987.25"  # a sleep nobody else runs
    jailed(tmp_path, f"(setsid sleep {marker} &) ; (nohup sleep {marker} >/dev/null 2>&1 &) ; echo started")
    time.sleep(0.5)
    survivors = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", marker]]
    assert not survivors


def test_cgroups_cannot_be_left(tmp_path: Path) -> None:
    if not Path("/sys/fs/cgroup/pids/cgroup.procs").exists():
        pytest.skip("no cgroup v1 pids hierarchy here")
    log = jailed(tmp_path, "echo $$ > /sys/fs/cgroup/pids/cgroup.procs && echo escaped || echo stayed")
    assert "stayed" in log and "escaped" not in log


def test_the_parent_records_what_held(tmp_path: Path) -> None:
    """Read from the kernel, for a live jailed process and for one that is not jailed (the test itself)."""
    import subprocess

    from harness.isolation.jail import containment_facts
    from harness.isolation.session import jailed_command

    work = tmp_path / "work"
    work.mkdir()
    launcher = subprocess.Popen(jailed_command([work], ["sleep", "30"]), cwd=work)
    try:
        deadline = time.monotonic() + 10
        while not psutil.Process(launcher.pid).children() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # past the exec: the inner process is `sleep` now
        jailed = containment_facts(psutil.Process(launcher.pid).children()[0].pid)
    finally:
        launcher.kill()
        launcher.wait()
    from harness.isolation.jail import JAIL_UID

    assert jailed == {"pid_namespace": "isolated", "mount_namespace": "isolated", "network": "isolated",
                      "capabilities": "none", "file_system": "its own root (the system folders, the interpreter, its packages, the harness's code; writable: its scratch folder)",
                      "user": f"unprivileged (uid {JAIL_UID})",
                      "devices": "its own /dev: full, null, random, urandom, zero"}
    mine = containment_facts(os.getpid())
    assert mine["pid_namespace"].startswith("NOT") and mine["network"].startswith("NOT")
    assert mine["user"].startswith("NOT") and mine["devices"].startswith("NOT minimal"), mine


def test_a_build_cache_under_tmp_stays_hidden_behind_the_private_tmp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache holds every candidate's binaries and logs: a jailed process neither reads nor forges them (a
    child loads the copies of its own binaries that the parent puts in its folder)."""
    cache = tmp_path / "cache"  # e.g. a benchmark's temporary cache
    cache.mkdir()
    (cache / "entry.so").write_text("binary")
    (tmp_path / "other-evaluation.txt").write_text("private")
    monkeypatch.setenv("KERNELWRIGHT_BUILD_CACHE", str(cache))
    work = Path(tempfile.mkdtemp(prefix="kw-jail-", dir=Path.home()))  # outside /tmp, so /tmp becomes private
    try:
        run_jailed(["sh", "-c", f"cat {cache}/entry.so || echo unread; echo forged > {cache}/entry.so; "
                                f"cat {tmp_path}/other-evaluation.txt || echo hidden"], work, LIMITS)
        log = (work / "process.log").read_text()
    finally:
        shutil.rmtree(work)
    assert "binary" not in log and "unread" in log and "hidden" in log, log
    assert (cache / "entry.so").read_text() == "binary"  # what it wrote went to its own empty cover


def test_the_header_folder_that_does_not_exist_yet_is_made_before_the_jail_binds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under /tmp or a home folder (both hidden in the jail) only folders that exist are bound back: a fresh
    home's first precompiled header would land where a build cannot see it."""
    from harness.isolation.session import needed_folders

    monkeypatch.setenv("KERNELWRIGHT_BUILD_CACHE", str(tmp_path / "fresh" / "builds"))
    headers = tmp_path / "fresh" / "builds" / "pch"
    assert headers in needed_folders() and headers.is_dir()
