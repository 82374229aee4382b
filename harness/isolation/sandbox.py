"""What every untrusted process gets: a clean environment, resource limits, cgroups, and a tree kill."""

from __future__ import annotations

import ctypes
import os
import re
import resource
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from harness.isolation.cgroups import ControlGroup
from harness.paths import code_root

_PASSED_THROUGH = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES",
                   "NVIDIA_VISIBLE_DEVICES", "CC", "CXX", "TORCH_CUDA_ARCH_LIST", "SYSTEMROOT")
# Test-only switches, never user options: a CPU child traps every CUDA query (tests/harness/test_gpu_machine.py);
# a job may turn the static policy off (harness/policy.py), so its child must be able to read that job back.
_TEST_SWITCHES = ("KERNELWRIGHT_TEST_TRAP_CUDA", "KERNELWRIGHT_TEST_STATIC_OFF")
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)
_TOKEN_VARIABLE = "KERNELWRIGHT_EVAL_TOKEN"
_CHILD_USER = "kernelwright-child"
_POLL_S = 0.05
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


@dataclass
class Limits:
    timeout_s: float
    memory_mb: int
    address_space_limit: bool  # RLIMIT_AS breaks CUDA (it maps huge virtual ranges); the watchdog still applies
    cpu_threads: int = 1
    cpus: str | None = None  # the CPU set the kernel pins a timed child to (reference and candidate alike)
    gpu: bool = False  # whether the process may see the GPUs (CUDA evaluations and profiles only)
    max_file_mb: int = 4096
    max_processes: int = 256


@dataclass
class ChildOutcome:
    returncode: int | None
    wall_s: float
    timed_out: bool = False
    memory_exceeded: bool = False
    peak_rss_mb: float = 0.0
    killed_pids: list[int] = field(default_factory=list)
    containment: dict[str, str] = field(default_factory=dict)


def child_environment(scratch: Path, cpu_threads: int, token: str, gpu: bool = False) -> dict[str, str]:
    """An allow-list of variables, never a secret: the candidate sees only what building and running need. A
    process that is not a CUDA evaluation sees no GPU, so nothing in it can initialise the CUDA driver."""
    env = {name: os.environ[name] for name in _PASSED_THROUGH if name in os.environ}
    env = {name: value for name, value in env.items() if not _SECRET_NAME.search(name)}
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.update({name: os.environ[name] for name in _TEST_SWITCHES if name in os.environ})
    env.update(_jail_switches())
    interpreter_bin = str(Path(sys.executable).parent)  # ninja lives beside the venv's python
    env["PATH"] = interpreter_bin + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    tmp = scratch / "tmp"
    tmp.mkdir(exist_ok=True)
    package_root = str(code_root())
    env.update(HOME=str(scratch), TMPDIR=str(tmp), PYTHONPATH=package_root, PYTHONDONTWRITEBYTECODE="1",
               MAX_JOBS="1", OMP_NUM_THREADS=str(cpu_threads), MKL_NUM_THREADS=str(cpu_threads),
               TORCH_EXTENSIONS_DIR=str(scratch / "torch_extensions"), PYTHONUNBUFFERED="1")
    # the jail's root has no /etc/passwd: getpass.getuser() (torch 2.11 calls it for inductor's cache folder when
    # torch._dynamo is imported) reads these first; without them a child jailed as nobody by root died on an H100
    # (KeyError: 'getpwuid(): uid not found: 65534')
    env.update(USER=_CHILD_USER, LOGNAME=_CHILD_USER)
    env[_TOKEN_VARIABLE] = token
    return env


def _jail_switches() -> dict[str, str]:
    """The test-only switches (harness/defences.py) the jail reads itself (it imports nothing of ours), passed
    into the jailed process's environment only where the test suite turned one of them off."""
    from harness.defences import DEFENCES_OFF, is_off

    return {DEFENCES_OFF: os.environ[DEFENCES_OFF]} if any(is_off(n) for n in ("jail_binds", "jail_uid", "jail_root")) \
        else {}


PR_SET_PDEATHSIG = 1


def _preexec(limits: Limits, group: "ControlGroup") -> None:
    group.join()
    if _libc is not None:  # if the evaluating process is killed, its child goes too
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _limit_resources(limits, memory_cgroup=group.limits_memory())


def _mapped_bytes() -> int:
    try:
        return int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _limit_resources(limits: Limits, memory_cgroup: bool = False) -> None:
    """RLIMIT_AS only where no cgroup limits memory, and then as an allowance above what this process has mapped
    already: a CUDA build of torch (and, on a GPU machine, its driver) maps gigabytes of address space before any
    candidate code runs, and an absolute limit left no room to map the candidate's extension."""
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.max_file_mb * mb, limits.max_file_mb * mb))
    cpu_seconds = int(limits.timeout_s * max(2, limits.cpu_threads + 1)) + 30  # waiting on a build costs no CPU
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
    if limits.address_space_limit and not memory_cgroup:
        ceiling = _mapped_bytes() + limits.memory_mb * mb
        resource.setrlimit(resource.RLIMIT_AS, (ceiling, ceiling))


def _tree(root_pid: int, token: str) -> list[psutil.Process]:
    """The child, its descendants, and any process that escaped the tree but still carries our token."""
    found: dict[int, psutil.Process] = {}
    try:
        root = psutil.Process(root_pid)
        found[root.pid] = root
        for proc in root.children(recursive=True):
            found[proc.pid] = proc
    except psutil.Error:
        pass
    for proc in psutil.process_iter():
        if proc.pid in found or proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(_TOKEN_VARIABLE) == token:
                found[proc.pid] = proc
        except psutil.Error:
            continue
    return list(found.values())


def kill_tree(root_pid: int, token: str) -> list[int]:
    """SIGKILL every process of the evaluation, compilers included (ninja gives each its own group)."""
    killed: list[int] = []
    for _ in range(3):  # a forking process may spawn while we kill: sweep until nothing is left
        procs = _tree(root_pid, token)
        if not procs:
            break
        for proc in procs:
            try:
                proc.kill()
                killed.append(proc.pid)
            except psutil.Error:
                continue
        psutil.wait_procs(procs, timeout=2)
    return killed


def _tree_rss_mb(root_pid: int, members: set[int] | None = None) -> float:
    """The resident memory of a process tree: the root and the `members` its control group lists where it has one
    (every process the tree starts stays in it), else the root and its descendants as psutil finds them: that scan
    reads every process on the machine (about 17 ms with 160 processes, 20 times a second while a child runs or a
    build compiles: a fifth of the parent's time in an evaluation, measured on the 2-core machine, 2026-11-28)."""
    if members:
        procs = [proc for proc in map(_process, {root_pid, *members}) if proc is not None]
    else:
        try:
            root = psutil.Process(root_pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return 0.0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total / 2**20


def _process(pid: int) -> "psutil.Process | None":
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def signal_name(returncode: int | None) -> str:
    if returncode is None or returncode >= 0:
        return f"exit code {returncode}"
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"
