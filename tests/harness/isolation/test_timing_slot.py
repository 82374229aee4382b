"""Timed regions never overlap on one device, however evaluations are started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from agent.config import OptimizeConfig
from agent.run_spec import ModelSpec
from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.child.child_run import run_in_child
from harness.isolation.cgroups import build_freezers
from harness.isolation.sandbox import Limits
from harness.isolation.session import run_jailed
from harness.isolation.timing_slot import BuildDuringTiming, compiling, timing_cpus, timing_slot
from harness.measurement import timed_calls
from kernelwright.optimize_service import run_optimize
from kernelbench.bundled import find_bundled
from tests.conftest import RELU_CANDIDATE, relu_variant


def test_the_slot_excludes_threads_of_one_process() -> None:
    inside, overlaps = [0], []
    lock = threading.Lock()

    def hold() -> None:
        with timing_slot("cpu"):
            with lock:
                inside[0] += 1
                overlaps.append(inside[0])
            time.sleep(0.05)
            with lock:
                inside[0] -= 1

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: hold(), range(8)))
    assert max(overlaps) == 1


_HOLD_COMPILE_LOCK = """
import sys, time
from harness.isolation.timing_slot import compiling
with compiling():
    print("holding", flush=True)
    time.sleep(float(sys.argv[1]))
"""


class _Sampler:
    """A thread of this process, as another evaluation's reference computation would be, noting its own CPUs."""

    def __init__(self) -> None:
        self.seen: list[set[int]] = []
        self.stop = threading.Event()
        started = threading.Event()

        def sample() -> None:
            started.set()
            while not self.stop.is_set():
                self.seen.append(os.sched_getaffinity(0))
                time.sleep(0.0005)

        self.thread = threading.Thread(target=sample, daemon=True)
        self.thread.start()
        started.wait()

    def end(self) -> set[int]:
        now = os.sched_getaffinity(self.thread.native_id)
        self.stop.set()
        self.thread.join()
        return now


needs_two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: no other CPU to move to")


@needs_two_cpus
def test_the_processs_other_threads_leave_the_timing_cpus_while_it_times() -> None:
    """Threads that no freezer reaches (another evaluation's reference or canaries in this process) must not share
    the timed children's CPUs; they get their CPUs back after."""
    cpus, before = timing_cpus(1), os.sched_getaffinity(0)
    sampler = _Sampler()
    with timing_slot("cpu", cpus=cpus):
        time.sleep(0.05)
        during = os.sched_getaffinity(sampler.thread.native_id)
        seen = sampler.seen[-1]
    assert during == before - {int(cpus)} and seen == during
    assert sampler.end() == before and os.sched_getaffinity(0) == before


@needs_two_cpus
def test_an_evaluations_timing_moves_the_other_threads_off_its_cpus() -> None:
    sampler = _Sampler()
    evaluation = evaluate(find_bundled("relu"), relu_variant("return relu_ext.relu_forward(x)"), "cpu",
                          EvalPolicy(timing_budget_s=0.1))
    sampler.end()
    timed_cpu = int(timing_cpus(1))
    assert evaluation.speedup is not None
    assert any(timed_cpu not in cpus for cpus in sampler.seen) and timed_cpu in sampler.seen[-1]


@pytest.mark.timing
def test_a_cpu_timing_waits_for_compiles_of_other_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compile anywhere on the machine (here: another process, as a background header build or another
    kernelwright command would be) holds a CPU timing off; a GPU timing goes on beside it."""
    monkeypatch.setenv("KERNELWRIGHT_HOME", str(tmp_path))
    compiler = subprocess.Popen([sys.executable, "-c", _HOLD_COMPILE_LOCK, "1.0"], stdout=subprocess.PIPE, text=True)
    try:
        assert compiler.stdout is not None and compiler.stdout.readline().strip() == "holding"
        with timing_slot("cuda") as waited_gpu:
            pass
        with timing_slot("cpu") as waited_cpu:  # the compile holds its lock for 1 s from before this call
            pass
    finally:
        compiler.wait(10)
    assert waited_gpu.waited_s < 0.3 and waited_cpu.waited_s > 0.5


def test_compiles_wait_while_a_cpu_timing_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWRIGHT_HOME", str(tmp_path))
    stamps: dict[str, float] = {}
    timing_entered = threading.Event()

    def compile_job() -> None:
        timing_entered.wait(5)
        with compiling():
            stamps["compile_start"] = time.monotonic()

    worker = threading.Thread(target=compile_job)
    worker.start()
    with timing_slot("cpu"):
        timing_entered.set()
        time.sleep(0.3)
        stamps["timing_done"] = time.monotonic()
    worker.join(10)
    assert stamps["compile_start"] >= stamps["timing_done"]


def test_a_build_requested_by_the_timed_evaluation_itself_is_refused_not_waited_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A candidate can send a build request at any moment (from a thread that outlives `forward`): served inside
    its own CPU timing slot, the build would wait forever on the lock that very thread holds."""
    monkeypatch.setenv("KERNELWRIGHT_HOME", str(tmp_path))
    outcome: list[str] = []

    def timed_then_build() -> None:
        with timing_slot("cpu"):
            try:
                with compiling():
                    outcome.append("built")
            except BuildDuringTiming:
                outcome.append("refused")
        with compiling():  # after the slot, builds go on as usual
            outcome.append("built after")

    worker = threading.Thread(target=timed_then_build, daemon=True)
    worker.start()
    worker.join(10)
    assert outcome == ["refused", "built after"]


_SPIN = ["sh", "-c", "i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done"]  # a few CPU seconds, like a compiler


def _spinning_build(tmp_path: Path) -> tuple[threading.Thread, dict[str, object]]:
    """A build (run_jailed, as the compilers are run) spinning on a core, in a thread; its outcome when done."""
    result: dict[str, object] = {}
    folder = tmp_path / "build"
    folder.mkdir()
    before = set(build_freezers())
    thread = threading.Thread(target=lambda: result.update(outcome=run_jailed(_SPIN, folder, Limits(60, 512, False))))
    thread.start()
    deadline = time.monotonic() + 10
    while not (set(build_freezers()) - before) and time.monotonic() < deadline:
        time.sleep(0.01)
    groups = sorted(set(build_freezers()) - before)
    if not groups:  # a build's group has a freezer only where cgroups can freeze
        thread.join(60)
        pytest.skip("no cgroup freezer here: builds hold the compile lock instead (the test above)")
    result["group"] = groups[0]
    _until_spinning(groups[0])
    return thread, result


def _cpu_seconds(group: Path, interval: float) -> float:
    """CPU seconds the group's processes used over `interval` (a process that appears meanwhile counts whole)."""
    def usage() -> dict[int, float]:
        found = {}
        for pid in (int(p) for p in (group / "cgroup.procs").read_text().split()):
            try:
                found[pid] = sum(psutil.Process(pid).cpu_times()[:2])
            except psutil.Error:
                continue
        return found

    start = usage()
    time.sleep(interval)
    return sum(seconds - start.get(pid, 0.0) for pid, seconds in usage().items())


def _until_spinning(group: Path) -> None:
    deadline = time.monotonic() + 30
    while _cpu_seconds(group, 0.2) < 0.1 and time.monotonic() < deadline:
        pass


@pytest.mark.timing
def test_a_cpu_timing_freezes_running_builds_instead_of_waiting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWRIGHT_HOME", str(tmp_path))
    thread, result = _spinning_build(tmp_path)
    group = result["group"]
    assert isinstance(group, Path)
    with timing_slot("cpu") as slot:
        frozen_cpu = _cpu_seconds(group, 0.4)
    running_cpu = _cpu_seconds(group, 0.4)
    thread.join(60)
    assert slot.waited_s < 0.3 and slot.frozen_builds >= 1  # no wait for the build to end
    assert frozen_cpu < 0.02 < 0.1 < running_cpu  # it stood still while timed, and ran again after
    assert result["outcome"].returncode == 0 and not result["outcome"].timed_out


def test_a_prebuild_child_running_candidate_python_is_frozen_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A prebuild imports the candidate's module (its top level is untrusted Python) beside other work: a CPU
    timing freezes that child like a compiler."""
    monkeypatch.setenv("KERNELWRIGHT_HOME", str(tmp_path))
    spinning = "import time\nstarted = time.time()\nwhile time.time() - started < 4:\n    pass\n"
    before = set(build_freezers())
    thread = threading.Thread(target=run_in_child, args=(find_bundled("relu"), spinning, "build", "cpu",
                                                         EvalPolicy()))
    thread.start()
    deadline = time.monotonic() + 20
    while not (set(build_freezers()) - before) and time.monotonic() < deadline:
        time.sleep(0.01)
    groups = sorted(set(build_freezers()) - before)
    if not groups:
        thread.join(60)
        pytest.skip("no cgroup freezer here")
    _until_spinning(groups[0])  # the zygote started, forked it, and it is importing the candidate
    with timing_slot("cpu") as slot:
        frozen_cpu = _cpu_seconds(groups[0], 0.4)
    running_cpu = _cpu_seconds(groups[0], 0.4)
    thread.join(60)
    assert slot.frozen_builds >= 1 and frozen_cpu < 0.02 < 0.1 < running_cpu


_HOLD_SLOT_AND_DIE = """
import os, signal
from harness.isolation.timing_slot import timing_slot
with timing_slot("cpu") as slot:
    print(slot.frozen_builds, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # dies holding the slot: nothing thaws the builds it froze
"""


def test_a_build_frozen_by_a_timer_that_died_is_thawed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWRIGHT_HOME", str(tmp_path))
    thread, result = _spinning_build(tmp_path)
    group = result["group"]
    assert isinstance(group, Path)
    timer = subprocess.run([sys.executable, "-c", _HOLD_SLOT_AND_DIE], capture_output=True, text=True, timeout=30)
    assert timer.returncode == -9 and int(timer.stdout.split()[0]) >= 1
    assert _cpu_seconds(group, 0.6) > 0.1  # its own process saw the lock free and thawed it
    thread.join(60)
    assert result["outcome"].returncode == 0


@pytest.mark.slow
def test_optimize_best_of_four_times_one_candidate_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`optimize --candidates 4` through the real local executor and harness: four kernels of one round (the same
    C++ source, so one cached build) are timed one after another; this fails if timing ever overlaps again."""
    intervals: list[tuple[float, float]] = []
    measure = timed_calls.Timing.measure

    def recorded(self: timed_calls.Timing) -> timed_calls.TimedRun:
        began = time.perf_counter()
        try:
            return measure(self)
        finally:
            intervals.append((began, time.perf_counter()))

    monkeypatch.setattr(timed_calls.Timing, "measure", recorded)
    kernels = [RELU_CANDIDATE.read_text() + f"\n# variant {slot}\n" for slot in range(4)]
    script = tmp_path / "four.json"
    script.write_text(json.dumps({"replies": [{"purpose": "coder", "content": f"```python\n{k}```"} for k in kernels]}))
    config = OptimizeConfig(device="cpu", rounds=1, candidates=4, workers=4, policy=EvalPolicy(timing_budget_s=0.2))
    summary = run_optimize("relu", config, ModelSpec(model=f"scripted:{script}"), f"sqlite:///{tmp_path / 't.db'}")
    # every evaluation times its independent process sets one after another (EvalPolicy.process_pairs)
    assert summary["best"]["verdict"] == "accepted" and len(intervals) == 4 * config.policy.process_pairs
    ordered = sorted(intervals)
    assert all(a[1] <= b[0] for a, b in zip(ordered, ordered[1:])), f"timed regions overlapped: {intervals}"


def test_the_gpu_timing_slot_is_machine_wide_not_per_home(tmp_path, monkeypatch) -> None:
    """Two kernelwright homes on one machine share its GPU: one holding the CUDA slot makes the other wait."""
    import threading
    import time as clock

    from harness.isolation.timing_slot import _timing_lock, timing_slot

    monkeypatch.setenv("KERNELWRIGHT_HOME", str(tmp_path / "one"))
    first = _timing_lock("cuda")
    monkeypatch.setenv("KERNELWRIGHT_HOME", str(tmp_path / "two"))
    assert _timing_lock("cuda") == first
    held = threading.Event()

    def hold() -> None:
        with timing_slot("cuda"):
            held.set()
            clock.sleep(0.5)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(5)
    with timing_slot("cuda") as slot:
        assert slot.waited_s > 0.3
    thread.join()
