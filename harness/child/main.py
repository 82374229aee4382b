"""The child process: runs the untrusted candidate (role `candidate`) or times the reference (role `reference`,
never loads candidate code), reports raw facts, decides nothing.

Run by the parent as `python -m harness.child SCRATCH CMD_FD MSG_FD ROLE [SLOTS_FD]` inside the jail. It answers
the parent's commands (load, correctness, knockout, then for timing on the CPU slots and run, on CUDA stage, go,
probe and outputs, and finish) over a pipe. The parent holds the clock around `run`/`go`, on the CPU writes the
inputs and reads the outputs itself while this process is frozen, compares outputs against references it computed
itself and derives the verdict; a child that dies, hangs or lies can at worst make its own candidate fail.

Each command is one type of harness/isolation/protocol.py, dispatched by its type (`HANDLERS`) to one handler of
`Child`, kept by command group: loading.py (load), correctness.py (correctness, knockout, census), timing.py
(stage, go, slots, run), probing.py (probe, outputs); finish is here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable

from harness.child import job as J
from harness.child.correctness import Checking
from harness.child.loading import Loading
from harness.child.probing import Probing
from harness.child.process import (CandidateFailure, EventLog, describe_device, network_namespace, note_replacements,
                                   short_traceback, write_result)
from harness.child.timing import TimedCalls
from harness.compilation.build_cache import KernelSwitch, RemoteBuilder
from harness.isolation import protocol as P
from harness.isolation.channel import ChildEnd
from harness.values.integrity import thread_state
from harness.values.precision import precision_settings

# Which handler answers each command. Looked up on the instance at every command, by name: nothing the parent trusts
# depends on what runs here, and the attack tests patch these methods the way a hostile candidate would.
HANDLERS: dict[type[P.Command], str] = {
    P.Load: "do_load", P.Correctness: "do_correctness", P.Knockout: "do_knockout", P.Census: "do_census",
    P.Stage: "do_stage", P.Go: "do_go", P.Probe: "do_probe", P.Slots: "do_slots", P.Run: "do_run",
    P.Outputs: "do_outputs", P.Finish: "do_finish",
}


class Child(Loading, Checking, TimedCalls, Probing):
    """The child's state between the parent's commands. Each `do_*` method answers one command."""

    def __init__(self, scratch: Path, channel: ChildEnd, role: str, slots_fd: int | None = None) -> None:
        import torch

        from harness.values.modules import module_from_file

        self.scratch = scratch
        self.channel = channel
        self.role = role
        self.job = J.ChildJob.model_validate_json((scratch / J.JOB_FILE).read_text())
        self.events = EventLog(scratch / J.EVENTS_FILE)
        self.events.write(phase="start", netns=network_namespace())
        if self.job.device == "cpu":
            torch.set_num_threads(self.job.policy.cpu_threads)
        self.switch = KernelSwitch()
        if self.job.device == "cuda":
            self.switch.watch_graphs(torch.cuda.CUDAGraph)
        self.builder = RemoteBuilder(channel, self.switch, compile_only=self.job.device == "cuda-compile-only")
        self.builder.install()
        self.integrity: list[str] = []
        self.result = J.ChildResult(status="ok",
                                    device_info=describe_device(self.job.device, self.job.policy.cpu_threads))
        self.result.builds, self.result.integrity = self.builder.builds, self.integrity  # kept: they grow
        self.problem = module_from_file(scratch / J.PROBLEM_FILE, "kernelwright_problem")  # before candidate code
        self.payload: dict[str, Any] = {}
        self.staged: list[list[Any]] = []
        self.outputs: list[Any] = []
        self.held: dict[int, Any] = {}  # earlier outputs the parent still holds, by its handle (`run`'s hold)
        self.timing_started = False
        self.pools: list[Any] | None = None  # fresh-input pools, made at the first `stage` (CUDA)
        self.slots: list[list[Any]] = []  # input sets the parent writes itself (`slots`, `run`)
        self.slots_fd = slots_fd  # a file the parent maps too, holding those input sets (isolation/shared_slots.py)
        self.bases: list[list[Any]] = []  # the trials' inputs on the device, from which `stage` makes fresh ones
        self.flush: Callable[[], None] = lambda: None
        self.kernel_calls = {"correctness": 0, "timed": 0}

    def do_finish(self, command: P.Finish) -> P.Status:
        self.events.write(phase="done")
        if hasattr(self, "threads"):
            self.threads["after_timing"] = thread_state()
            self.settings["after_timing"] = precision_settings()
            note_replacements(self.identities, self.integrity, "the timed calls")
        self.integrity.extend(f"disguised: {why}" for why in self.switch.disguised)
        self.result.kernel_calls = dict(self.kernel_calls, wrapped_functions=self.switch.wrapped)
        if self.result.telemetry:
            from harness.feedback.nvml import snapshot

            self.result.telemetry["after"] = snapshot()
        write_result(self.scratch, self.result)
        return P.Status("finished")

    def fail(self, kind: str, message: str) -> None:
        """The conversation ends with this failure: the result file says it, then the parent hears it."""
        self.result.status, self.result.message = kind, message
        write_result(self.scratch, self.result)
        self.channel.send(P.Failed(kind, message[-8000:]).wire())


def serve(child: Child) -> None:
    """Answer the parent's commands until `finish`. A candidate failure ends the conversation with its kind."""
    while True:
        message = child.channel.receive()
        name = message.get("cmd", "") if isinstance(message, dict) else ""
        try:
            try:
                command = P.decode_command(message)
            except ValueError as exc:
                raise CandidateFailure("crash", str(exc)) from None
            reply = getattr(child, HANDLERS[type(command)])(command)
        except CandidateFailure as failure:
            child.fail(failure.kind, str(failure))
            return
        except BaseException as exc:  # the candidate's code raised (or broke the harness) during this command
            child.fail("runtime_error", f"failed while {name}:\n" + short_traceback(exc))
            return
        child.channel.send(reply.wire())
        if type(command) is P.Finish:
            return


def run_alone(child: Child) -> None:
    """A job that does not converse (build, profile): its work, then the result file."""
    try:
        child.result.status = child.do_load(P.Load()).status
        if child.job.mode == "profile":
            child.do_correctness(P.Correctness())
    except CandidateFailure as failure:
        child.result.status, child.result.message = failure.kind, str(failure)
    write_result(child.scratch, child.result)


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (malloc.h)


def steady_allocator() -> bool:
    """Fixed glibc malloc thresholds for this process, before any model allocates. Left alone, glibc serves
    allocations above a threshold that moves with the process's history (128 KB to 32 MB) from fresh mmaps and
    returns freed memory to the kernel, so whether each call pays page faults for its output depends on what the
    process did before: the same 1 MB ReLU timed 67 us per call in one process and 179 us in another (p90 185 us).
    With both thresholds fixed, every child reuses its memory the same way: 73-77 us, p90 90 us. The reference's
    child and the candidate's get the same settings. True when glibc took them."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30))
    except (OSError, AttributeError):  # not glibc
        return False


def apply_test_switches() -> None:
    """A test-only switch (listed in harness/isolation/sandbox.py, never a user option): every CUDA query fails
    loudly (a CPU child must make none)."""
    if os.environ.get("KERNELWRIGHT_TEST_TRAP_CUDA"):
        import torch

        def trapped(*_args: Any, **_kwargs: Any) -> Any:
            raise RuntimeError("a CPU child queried CUDA (KERNELWRIGHT_TEST_TRAP_CUDA)")

        for owner, name in ((torch.cuda, "is_available"), (torch.cuda, "init"), (torch.cuda, "_lazy_init"),
                            (torch.cuda, "device_count"), (torch._C, "_cuda_getDeviceCount"), (torch._C, "_cuda_init")):
            if hasattr(owner, name):
                setattr(owner, name, trapped)


def main() -> None:
    scratch, read_fd, write_fd, role = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    steady_allocator()
    apply_test_switches()
    channel = ChildEnd(read_fd, write_fd)
    channel.send({"hello": os.getpid()})
    child = Child(scratch, channel, role, slots_fd=int(sys.argv[5]) if len(sys.argv) > 5 else None)
    if child.job.conversing:
        serve(child)
    else:  # build, profile: no conversation, then the result file
        run_alone(child)
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: nothing the candidate registered at exit runs after the report


if __name__ == "__main__":
    main()
