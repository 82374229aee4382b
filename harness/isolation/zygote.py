"""A warm start for untrusted children: one clean process per kernelwright process that has imported torch and the
child's modules (and never anything of a candidate) forks a fresh child for each evaluation.

Each fork gets exactly what a child started from scratch gets (`jail.py` + `sandbox._preexec`): its own session,
the evaluation's cgroups, resource limits, death with its parent, the clean environment, a log as stdout/stderr,
no file descriptor but the two pipes of its conversation, then new PID/mount/network namespaces, a second fork
that is PID 1 there, sealed file systems and no capabilities; only then does it run the child's program (the
session names it: `harness.child`) in-process instead of exec'ing a new interpreter (which costs 1-2 s of
`import torch` per child on these machines).

The zygote is started unjailed but never runs candidate code; it only forks. It speaks over a SOCK_SEQPACKET pair:
a request (JSON, with the conversation's two pipe ends attached) is answered with the fork's pid, and every fork's
exit status is sent when it ends. `KERNELWRIGHT_ZYGOTE=off` starts every child from scratch instead.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

_MESSAGE_BYTES = 1 << 16
_lock = threading.Lock()
_current: "Zygote | None" = None
_starting: "list[Zygote]" = []  # a zygote still importing torch, which a worker waits for (under _lock)
_stopped = threading.Event()  # Ctrl-C: no zygote starts or is waited for any more


def enabled() -> bool:
    return os.environ.get("KERNELWRIGHT_ZYGOTE", "on").lower() not in ("off", "0", "no", "false")


class ForkedChild:
    """The parts of `subprocess.Popen` the sessions use, for a child forked by the zygote."""

    def __init__(self, zygote: "Zygote", pid: int) -> None:
        self.zygote, self.pid, self.returncode = zygote, pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.exit_status(self.pid, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.zygote.exit_status(self.pid, timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired("forked child", timeout or 0)
        return self.returncode


class Zygote:
    """The parent's end: start the zygote, ask it for forks, collect exit statuses."""

    def __init__(self, environment: dict[str, str], program: str) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.socket, self.program = ours, program
        self.process = subprocess.Popen(
            [sys.executable, "-m", "harness.isolation.zygote", str(theirs.fileno()), program], env=environment,
            close_fds=True, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=_die_with_parent)
        theirs.close()
        self.condition = threading.Condition()
        self.statuses: dict[int, int] = {}
        self.forked: list[int] = []
        self.request_lock = threading.Lock()
        self.ready = False
        self.dead = False
        threading.Thread(target=self._read, daemon=True, name="kernelwright-zygote").start()

    def _read(self) -> None:
        while True:
            try:
                data = self.socket.recv(_MESSAGE_BYTES)
            except OSError:
                data = b""
            with self.condition:
                if not data:
                    self.dead = True
                else:
                    message = json.loads(data)
                    if "exited" in message:
                        self.statuses[message["exited"]] = message["status"]
                    elif "forked" in message:
                        self.forked.append(message["forked"])
                    elif "ready" in message:
                        self.ready = True
                self.condition.notify_all()
            if not data:
                return

    def fork(self, request: dict[str, Any], fds: tuple[int, ...], timeout_s: float = 120.0) -> ForkedChild:
        """A jailed child running this zygote's program (`python -m` style) with `request["argv"]`; its pid (the
        jail's outer process)."""
        with self.request_lock:
            socket.send_fds(self.socket, [json.dumps(request).encode()], list(fds))
            with self.condition:
                if not self.condition.wait_for(lambda: self.forked or self.dead, timeout_s) or not self.forked:
                    raise ZygoteUnavailable("the zygote did not answer")
                return ForkedChild(self, self.forked.pop(0))

    def exit_status(self, pid: int, timeout: float | None) -> int | None:
        with self.condition:
            self.condition.wait_for(lambda: pid in self.statuses or self.dead, timeout)
            if pid in self.statuses:
                return self.statuses.pop(pid)
            return -signal.SIGKILL if self.dead else None  # the zygote died: its forks died with it

    def wait_ready(self, timeout_s: float) -> bool:
        with self.condition:
            return self.condition.wait_for(lambda: self.ready or self.dead or _stopped.is_set(), timeout_s) and \
                self.ready and not _stopped.is_set()

    def stop(self) -> None:
        self.socket.close()
        try:
            self.process.kill()
            self.process.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            pass


class ZygoteUnavailable(RuntimeError):
    """The zygote could not fork: the caller starts the child from scratch instead."""


def _die_with_parent() -> None:
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def shared_zygote(program: str) -> Zygote | None:
    """This process's zygote for `program`, the package whose `__main__` each fork runs (started on first use and
    restarted if it died), or None where it cannot run."""
    global _current
    if not enabled() or _stopped.is_set():
        return None
    with _lock:
        if _current is not None and not _current.dead and _current.process.poll() is None and \
                _current.program == program:
            return _current
        from harness.isolation.sandbox import child_environment

        home = Path(os.environ.get("TMPDIR", "/tmp"))
        environment = child_environment(home, 1, "zygote")
        environment.pop("TMPDIR", None)
        environment["HOME"] = str(home)
        zygote = _started_on_a_lasting_thread(environment, program)
        if zygote is None:
            return None
        _starting.append(zygote)
        try:
            ready = zygote.wait_ready(120)
        finally:
            _starting.remove(zygote)
        if not ready:
            zygote.stop()
            return None
        _current = zygote
        return zygote


def _started_on_a_lasting_thread(environment: dict[str, str], program: str) -> Zygote | None:
    """PR_SET_PDEATHSIG fires when the *thread* that started a process ends: a worker thread that started the
    zygote and then finished would take every other thread's children with it. So a thread that lives as long as
    this process starts it."""
    started: list[Zygote | None] = []
    done = threading.Event()

    def own() -> None:
        try:
            started.append(Zygote(environment, program))
        except OSError:
            started.append(None)
        done.set()
        threading.Event().wait()  # never set: this thread ends with the process

    threading.Thread(target=own, daemon=True, name="kernelwright-zygote-owner").start()
    done.wait()
    return started[0]


def stop_zygotes() -> None:
    """Ctrl-C: stop this process's zygote and one still starting, so a worker waiting for it (seconds of importing
    torch) gives up at once instead of holding the exit."""
    _stopped.set()
    for zygote in [*_starting, *([_current] if _current is not None else [])]:
        with zygote.condition:
            zygote.dead = True
            zygote.condition.notify_all()
        zygote.stop()


@atexit.register
def _stop_zygote() -> None:
    if _current is not None:
        _current.stop()


# -- the zygote's side --------------------------------------------------------------------------------------------


# what every fork is spared: torch, the fork's own steps, and the ones the child imports lazily on every run
# (torch.utils.cpp_extension alone is ~55 ms: its load_inline is what the child replaces); the program's own
# modules are preloaded too, by importing its `__main__` (which runs nothing unless run as `__main__`)
_PRELOADED = ("torch", "torch.utils.cpp_extension", "harness.isolation.jail", "harness.isolation.sandbox",
              "harness.isolation.cgroups", "harness.values.modules", "harness.values.fresh_inputs")


def _serve(channel: socket.socket, program: str) -> None:
    import importlib

    for name in (*_PRELOADED, f"{program}.__main__"):
        importlib.import_module(name)
    channel.send(json.dumps({"ready": os.getpid()}).encode())
    watch = selectors.DefaultSelector()  # the channel and a pidfd per fork: an exit is reported at once
    watch.register(channel, selectors.EVENT_READ)
    children: dict[int, int | None] = {}
    while True:
        ready = watch.select(timeout=None if all(children.values()) else 0.05)  # no pidfds: poll for exits
        _reap(channel, children, watch)
        if not any(key.fileobj is channel for key, _ in ready):
            continue
        try:
            data, fds, _, _ = socket.recv_fds(channel, _MESSAGE_BYTES, 3)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)  # the parent is gone: its forks die with this process (PR_SET_PDEATHSIG)
        pid = os.fork()
        if pid == 0:
            try:
                _become_child(channel, json.loads(data), fds, program)
            finally:
                os._exit(127)
        for fd in fds:
            os.close(fd)
        children[pid] = _exit_watch(pid, watch)
        channel.send(json.dumps({"forked": pid}).encode())


def _exit_watch(pid: int, watch: selectors.BaseSelector) -> int | None:
    """A pidfd that becomes readable when `pid` exits (Linux >= 5.3), registered with `watch`; None elsewhere."""
    try:
        handle = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
    watch.register(handle, selectors.EVENT_READ)
    return handle


def _reap(channel: socket.socket, children: dict[int, int | None], watch: selectors.BaseSelector) -> None:
    for pid, handle in list(children.items()):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if handle is not None:
                watch.unregister(handle)
                os.close(handle)
            del children[pid]
            channel.send(json.dumps({"exited": pid, "status": os.waitstatus_to_exitcode(status)}).encode())


def _become_child(channel: socket.socket, request: dict[str, Any], fds: list[int], program: str) -> None:
    """Runs in the fork: the same steps as a child started from scratch, in the same order."""
    from harness.isolation import jail
    from harness.isolation.cgroups import ControlGroup
    from harness.isolation.sandbox import Limits, _preexec

    channel.close()
    os.setsid()
    # what Popen's preexec_fn does for an exec'd child: cgroups, death with the zygote (which dies with the
    # parent), resource limits
    _preexec(Limits(**request["limits"]), ControlGroup(folders=[Path(f) for f in request["cgroups"]]))
    log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    for target, source in ((0, null), (1, log), (2, log)):
        os.dup2(source, target)
    previous = 2
    for kept in sorted(fds):  # only its pipes (and its shared input slots) stay open
        os.closerange(previous + 1, kept)
        previous = kept
    os.closerange(previous + 1, 65536)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    names = {"{CMD_FD}": fds[0], "{MSG_FD}": fds[1], **({"{SLOTS_FD}": fds[2]} if len(fds) > 2 else {})}
    argv = [str(names.get(str(part), part)) for part in request["argv"]]
    writable = [os.path.realpath(folder) for folder in request["writable"]]
    visible = [os.path.realpath(folder) for folder in request["visible"]]
    hidden = [os.path.realpath(folder) for folder in request["hidden"]]
    os._exit(jail.in_new_namespaces(lambda: _run_child(writable, visible, hidden, program, argv)))


def _run_child(writable: list[str], visible: list[str], hidden: list[str], program: str, argv: list[str]) -> None:
    """`python -m PROGRAM ARGV...`, in this (forked, jailed) process."""
    import random
    import runpy
    import tempfile
    import traceback
    import warnings

    from harness.isolation import jail

    jail.enter(writable, visible, hidden)
    tempfile.tempdir = None  # TMPDIR is the evaluation's own now
    random.seed()
    sys.argv = [program, *argv]
    try:
        import torch

        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        with warnings.catch_warnings():  # the program was preloaded here on purpose: runpy's warning about that
            warnings.filterwarnings("ignore", category=RuntimeWarning, module="runpy")  # is no one's output
            runpy.run_module(program, run_name="__main__", alter_sys=True)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


if __name__ == "__main__":
    _serve(socket.socket(fileno=int(sys.argv[1])), sys.argv[2])
