"""The parent's side of one untrusted process: start it in the jail, talk to it over a channel, enforce its
clocks and memory, serve the builds it asks for, and kill everything it started when it is done.

Wall clocks: the run clock (`Limits.timeout_s`) stops while the parent builds an extension the child asked for;
each build has its own clock (`EvalPolicy.build_timeout_s`, enforced by the build service).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from harness.isolation.cgroups import ControlGroup
from harness.isolation.channel import ChannelClosed, ParentEnd
from harness.isolation.protocol import R, Command, as_wire, read_reply
from harness.isolation.sandbox import ChildOutcome, Limits, _preexec, _tree_rss_mb, child_environment, kill_tree
from harness.isolation.shared_slots import SharedSlots
from harness.isolation.timing_slot import BuildDuringTiming, compiling, timing_abandoned
from harness.isolation.zygote import ForkedChild, ZygoteUnavailable, shared_zygote, stop_zygotes

_POLL_S = 0.05
CHILD_PROGRAM = "harness.child"
CHILD_PACKAGES = ("harness", "kernelbench")  # what the child imports of our code (harness -> kernelbench)  # run as `python -m`: the program in the candidate's process (harness/child/main.py)
BuildHandler = Callable[[dict[str, Any]], dict[str, Any]]


class ChildStopped(Exception):
    """The child can no longer answer: it died, timed out, outgrew its memory or broke the protocol."""


def needed_folders() -> list[Path]:
    """All a jailed process sees besides the system folders (`jail.SYSTEM`, less `jail.COVERED`) and its own scratch
    folder: the interpreter (its prefixes and the one its executable really lives in; only its own folders and files
    where a prefix is a covered system folder such as /usr/local), user site-packages, the packages of the harness's
    code the child imports (not the rest of the project: its runs, its git history), the precompiled headers, where
    CUDA and the libraries the environment names live, and the build's tools (ninja, the compilers). Not the build
    cache: a child gets copies of its own binaries in its scratch folder (`_serve_build`)."""
    import site

    from harness.paths import build_cache_dir, code_root

    user_site = Path(site.getusersitepackages()) if site.ENABLE_USER_SITE else None
    headers = build_cache_dir() / "pch"
    headers.mkdir(parents=True, exist_ok=True)  # it must exist to be bound back: headers land there later
    interpreter = Path(os.path.realpath(sys.executable)).parent.parent
    code = [code_root() / package for package in CHILD_PACKAGES]
    named = [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    named += [Path(p) for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    prefixes = [Path(sys.prefix), Path(sys.base_prefix), interpreter]
    found = [*(p for p in prefixes if not _shared(p)), *(_own_paths() if any(map(_shared, prefixes)) else []),
             *([user_site] if user_site else []), *code, headers, *named]
    for path in [*_package_folders(), *_toolkit(), *_linker_folders(), *_tools()]:
        found += [] if _already_there(path, found) else [path]
    return [path for path in dict.fromkeys(found) if path.is_absolute() and path.exists()]


def _package_folders() -> list[Path]:
    """Every package folder on the interpreter's path, wherever it lies: a .pth file can add another
    interpreter's site-packages (`make setup TORCH_SPEC=skip` on the GPU image adds the image's own, where torch and
    pydantic live; without it every child died at start-up: `No module named 'pydantic'`, H100, 2026-11-28)."""
    return [Path(p) for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]


def _already_there(path: Path, found: list[Path]) -> bool:
    """Whether the jail shows `path` anyway: inside a system folder it binds (and not a covered one), or inside
    a folder already found."""
    from harness.isolation.jail import COVERED, SYSTEM

    inside = (lambda p, folders: any(p == f or p.startswith(f.rstrip("/") + "/") for f in folders))
    text = str(path)
    return (inside(text, list(SYSTEM)) and not inside(text, list(COVERED))) or inside(text, [str(f) for f in found])


def _shared(prefix: Path) -> bool:
    """Whether an interpreter's prefix is a system folder that holds more than it (/usr, /usr/local): bound by
    its own folders and files only (`_own_paths`), never whole."""
    from harness.isolation.jail import COVERED, SYSTEM

    real = os.path.realpath(prefix)
    return real in (*SYSTEM, *COVERED, "/") or any(os.path.realpath(c) == real for c in COVERED)


def _own_paths() -> list[Path]:
    """The running interpreter's own folders and files: its standard library, site-packages (every one the site
    module names), headers, its executable and its shared library."""
    import site
    import sysconfig

    paths = [Path(p) for key, p in sysconfig.get_paths().items() if key != "scripts" and key != "data"]
    paths += [Path(p) for p in site.getsitepackages()]
    paths.append(Path(os.path.realpath(sys.executable)))
    library = sysconfig.get_config_var("INSTSONAME") or sysconfig.get_config_var("LDLIBRARY")
    libdir = sysconfig.get_config_var("LIBDIR")
    if library and libdir:
        paths += [Path(libdir) / library, Path(os.path.realpath(Path(libdir) / library))]
    return paths


def _toolkit() -> list[Path]:
    """The CUDA toolkit where torch looks for it without CUDA_HOME (/usr/local/cuda), and the folder it leads to."""
    default = Path("/usr/local/cuda")
    return [default, Path(os.path.realpath(default))] if default.exists() else []


def _linker_folders() -> list[Path]:
    """The dynamic linker's configured folders (/etc/ld.so.conf, /etc/ld.so.conf.d) inside a covered system folder,
    where a GPU container may keep its driver's libraries (/usr/local/nvidia/lib64, a CUDA compat folder): what the
    child loads without LD_LIBRARY_PATH. Not /usr/local/lib itself, every Debian's default, which holds other
    installs."""
    from harness.isolation.jail import COVERED

    lines = []
    for file in [Path("/etc/ld.so.conf"), *sorted(Path("/etc/ld.so.conf.d").glob("*.conf"))]:
        try:
            lines += file.read_text().splitlines()
        except OSError:
            continue
    folders = [line.split("#")[0].strip() for line in lines if line.strip().startswith("/")]
    default = {f"{c}/lib" for c in COVERED} | {f"{c}/lib/{os.uname().machine}-linux-gnu" for c in COVERED}
    return [Path(f) for f in folders if f not in default and any(f.startswith(c + "/") for c in COVERED)]


COMPILER_VARIABLES = ("CC", "CXX")  # the compilers torch's builds use (the child environment passes them on)


def _tools() -> list[Path]:
    """The programs a build runs, where PATH or the environment (CC, CXX: /opt/gcc/bin/g++ on a GPU image) finds
    them: each file itself, the file it really is, and, for a compiler installed outside the system folders, its
    whole installation (g++ runs cc1plus and reads headers and libraries from its own prefix)."""
    named = [os.environ[v].split()[0] for v in COMPILER_VARIABLES if os.environ.get(v, "").strip()]
    found = [shutil.which(tool) for tool in ("ninja", "nvcc", "c++", "g++", "cc", "gcc", *named)]
    files = [Path(p) for tool in found if tool for p in dict.fromkeys([tool, os.path.realpath(tool)])]
    return [*files, *(_installation(f) for f in files if f.name != "ninja" and _installation(f))]


def _installation(program: Path) -> Path | None:
    """The prefix a compiler was installed into (the folder above its bin/), unless that is a system folder or one
    shared with other installs (/usr, /usr/local), where only the program's own files are bound."""
    folder = program.parent
    prefix = folder.parent if folder.name == "bin" else folder
    return None if _shared(prefix) or str(prefix) == "/opt" else prefix


def hidden_folders() -> list[Path]:
    """What no jailed process may read though it is not secret to the user: kernelwright's home (the store, run
    transcripts and reports, the scratch root where the reference's folder holds every trial's inputs) and the
    build cache (other candidates' binaries and build logs). Each process gets its own folder back. Where the home
    holds the code or the interpreter (KERNELWRIGHT_HOME set to the project itself), its scratch root and the
    cache are hidden instead."""
    from harness.paths import build_cache_dir, code_root, home, scratch_root

    root = scratch_root().resolve()
    root.mkdir(parents=True, exist_ok=True)  # it must exist to be covered
    whole = home().resolve()
    needed = [code_root(), Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()]
    holds_needed = any(n == whole or whole in n.parents for n in needed)
    from harness.defences import is_off

    if is_off("jail_hides_home"):
        return [root]
    return list(dict.fromkeys([root if holds_needed else whole, build_cache_dir()]))


def jailed_command(writable: list[Path], command: list[str]) -> list[str]:
    folders = [word for folder in writable for word in ("--writable", str(folder))]
    folders += [word for folder in needed_folders() for word in ("--visible", str(folder))]
    folders += [word for folder in hidden_folders() for word in ("--hidden", str(folder))]
    launcher = Path(__file__).with_name("jail.py")  # run as a script: the launcher imports nothing of ours
    return [sys.executable, str(launcher), *folders, "--", *command]


_live: set["_Jailed"] = set()
_stopping = threading.Event()


def kill_live_processes(for_good: bool = False) -> None:
    """Kill every jailed process this process started and has not finished (at exit, on interrupt). With
    `for_good`, no new one starts afterwards either (a worker thread half-way through an evaluation stops at
    its next process instead of building and timing for another minute)."""
    if for_good:
        _stopping.set()
        stop_zygotes()
    for jailed in list(_live):
        try:
            jailed.finish(grace_s=0)
        except (OSError, ValueError):  # its own thread finished it at the same moment
            continue


class _Jailed:
    """A process started in the jail with its own cgroups and token; `finish` kills whatever it left behind."""

    def __init__(self, command: list[str], folder: Path, limits: Limits, log: Path,
                 pass_fds: tuple[int, ...] = (), child_argv: list[str] | None = None, build: bool = False) -> None:
        """`child_argv` (with `{CMD_FD}`/`{MSG_FD}`/`{SLOTS_FD}` for the `pass_fds`): `command` runs the child's
        program with these arguments, so the zygote may fork it instead (the same jail, limits and environment).

        A `build` (a compiler, or a prebuild child running the candidate module's top level) must never run beside
        a CPU timing: it starts under the compile lock, which it releases once started where its cgroup can be
        frozen (the timing freezes it) and holds to the end where it cannot (the timing waits for it)."""
        if _stopping.is_set():
            raise ChildStopped("interrupted: no new process starts")
        self.compile_lock = ExitStack()
        if build:
            self.compile_lock.enter_context(compiling())
        try:
            self._start(command, folder, limits, log, pass_fds, child_argv, build)
        except BaseException:
            self.compile_lock.close()
            if getattr(self, "group", None) is not None and getattr(self, "proc", None) is None:
                self.group.remove()  # nothing started in it (Ctrl-C while waiting for the zygote)
            raise
        if self.group.freezer is not None:
            self.compile_lock.close()

    def _start(self, command: list[str], folder: Path, limits: Limits, log: Path, pass_fds: tuple[int, ...],
               child_argv: list[str] | None, build: bool) -> None:
        self.limits = limits
        self.token = uuid.uuid4().hex
        self.group = ControlGroup.create(self.token, limits.memory_mb, limits.max_processes, freezable=build,
                                         cpus=None if build else limits.cpus)
        self.outcome = ChildOutcome(returncode=None, wall_s=0.0, containment=self.group.describe())
        self.started = time.monotonic()
        self.log = open(log, "ab")
        environment = child_environment(folder, limits.cpu_threads, self.token, gpu=limits.gpu)
        self.proc: subprocess.Popen[bytes] | ForkedChild | None = None
        if child_argv is not None:
            self.proc = _forked(folder, limits, log, environment, self.group, pass_fds, child_argv)
        if self.proc is None:
            self.proc = subprocess.Popen(
                jailed_command([folder], command), cwd=folder, stdin=subprocess.DEVNULL, stdout=self.log,
                stderr=subprocess.STDOUT, env=environment, start_new_session=True,
                preexec_fn=lambda: _preexec(limits, self.group), close_fds=True, pass_fds=pass_fds)
        self.outcome.containment["started"] = "forked by the zygote" if isinstance(self.proc, ForkedChild) else "exec"
        _live.add(self)

    def thaw_if_abandoned(self) -> None:
        """Polled by its watchdog: frozen while no CPU timing holds the machine means its timer died mid-slot."""
        if self.group.frozen() and timing_abandoned():
            self.group.thaw()

    def over_memory(self) -> bool:
        rss = _tree_rss_mb(self.proc.pid, self.group.pids())
        self.outcome.peak_rss_mb = max(self.outcome.peak_rss_mb, rss)
        return rss > self.limits.memory_mb or self.group.hit_memory_limit()

    def finish(self, grace_s: float) -> ChildOutcome:
        """Give the process `grace_s` to exit, kill its tree and cgroup, collect the exit status. Idempotent."""
        if self.outcome.wall_s:
            return self.outcome
        try:
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
            self.outcome.killed_pids = self.group.kill_all() + kill_tree(self.proc.pid, self.token)
            self.outcome.returncode = self.proc.wait()
            self.outcome.memory_exceeded |= self.group.hit_memory_limit()
        finally:
            self.outcome.wall_s = time.monotonic() - self.started
            self.log.close()
            self.group.remove()
            self.compile_lock.close()
            _live.discard(self)
        return self.outcome


def _forked(folder: Path, limits: Limits, log: Path, environment: dict[str, str], group: ControlGroup,
            fds: tuple[int, ...], argv: list[str]) -> ForkedChild | None:
    """The child forked by this process's zygote, or None (no zygote here: the caller execs it)."""
    zygote = shared_zygote(CHILD_PROGRAM)
    if _stopping.is_set():  # Ctrl-C while this waited for the zygote: start nothing from scratch either
        raise ChildStopped("interrupted: no new process starts")
    if zygote is None or len(fds) not in (2, 3):
        return None
    request = {"argv": argv, "cwd": str(folder), "env": environment, "log": str(log), "limits": asdict(limits),
               "cgroups": [str(f) for f in group.folders], "writable": [str(folder)],
               "visible": [str(f) for f in needed_folders()], "hidden": [str(f) for f in hidden_folders()]}
    try:
        return zygote.fork(request, fds)
    except (OSError, ZygoteUnavailable):
        return None


class ChildSession:
    """One jailed `python -m harness.child SCRATCH CMD_FD MSG_FD ROLE` and the conversation with it."""

    def __init__(self, scratch: Path, limits: Limits, role: str = "candidate", on_build: BuildHandler | None = None,
                 prefix: list[str] | None = None, forkable: bool = False, shared: SharedSlots | None = None) -> None:
        """`forkable`: the zygote may fork this child (no CUDA device: a CUDA-initialised fork was never verified
        on a GPU, so GPU children are still started from scratch)."""
        self.limits, self.scratch = limits, scratch
        self.on_build = on_build
        self.paused_s = 0.0  # time spent building for the child: not on its run clock
        self.stopped: str | None = None
        self.inner_pid: int | None = None  # the pid the child gave itself in its hello (inside its namespace)
        cmd_r, cmd_w = os.pipe()
        msg_r, msg_w = os.pipe()
        self.shared = shared  # its timed input slots, in a file the parent maps too (harness/isolation/shared_slots.py)
        shared_fd = () if shared is None else (shared.fd,)
        command = [*(prefix or []), sys.executable, "-m", CHILD_PROGRAM, str(scratch), str(cmd_r), str(msg_w), role,
                   *map(str, shared_fd)]
        child_argv = [str(scratch), "{CMD_FD}", "{MSG_FD}", role, *(["{SLOTS_FD}"] if shared_fd else [])] \
            if forkable and not prefix else None
        self.jailed = _Jailed(command, scratch, limits, scratch / "child.log", pass_fds=(cmd_r, msg_w, *shared_fd),
                              child_argv=child_argv, build=role == "build")  # a prebuild runs candidate Python
        self.proc, self.outcome, self.started = self.jailed.proc, self.jailed.outcome, self.jailed.started
        os.close(cmd_r)
        os.close(msg_w)
        self.channel = ParentEnd(cmd_w, msg_r)

    # -- clocks and watchdog ---------------------------------------------------------------------------------

    def clock_from_now(self) -> None:
        """Restart the run clock (a process that waited idle for another one)."""
        self.paused_s = time.monotonic() - self.started

    def run_seconds(self) -> float:
        return time.monotonic() - self.started - self.paused_s

    def _deadline(self) -> float:
        return time.monotonic() + max(self.limits.timeout_s - self.run_seconds(), 0.0)

    def _stop(self, reason: str) -> ChildStopped:
        self.stopped = self.stopped or reason
        if reason == "timeout":
            self.outcome.timed_out = True
        elif reason == "memory":
            self.outcome.memory_exceeded = True
        return ChildStopped(reason)

    def _watch(self) -> None:
        self.jailed.thaw_if_abandoned()
        if self.run_seconds() > self.limits.timeout_s:
            raise self._stop("timeout")
        if self.jailed.over_memory():
            raise self._stop("memory")
        if self.proc.poll() is not None:
            raise self._stop("exited")

    # -- conversation ----------------------------------------------------------------------------------------

    def receive(self) -> dict[str, Any]:
        """The next message that is not a build request (those are served on the way)."""
        if self.stopped:
            raise ChildStopped(self.stopped)
        try:
            while True:
                if not self.channel.ready(_POLL_S):
                    self._watch()
                    continue
                message = self._handled(self.channel.take())
                if message is not None:
                    return message
        except ChannelClosed as exc:
            self.proc.poll()
            raise self._stop(f"closed: {exc}") from None

    def request(self, command: Command[R]) -> R:
        """Send a command (a harness/isolation/protocol.py type) and read the child's reply as the type the command
        declares: ChildFailed where the child reported its own failure instead, MalformedReply where it answered
        anything else (untrusted either way: the reply types check every field)."""
        try:
            self.channel.send(as_wire(command))
        except ChannelClosed:
            raise self._stop("exited") from None
        return read_reply(command, self.receive())

    def timed(self, command: Command[R], thaw: bool = False) -> tuple[int, dict[str, Any]]:
        """Send `command` and wait for its reply with nothing else in between: (nanoseconds, reply) on the
        parent's clock, which nothing in the child can reach; the reply as it came (read it with `read_reply` once
        the clock has stopped). `thaw`: the child is frozen and thawed only once
        the clock runs. A build the child asks for meanwhile is served (refused while a CPU timing holds the
        machine) and the wait goes on: a candidate that builds on its first call fails only where it is timed.
        The command is encoded before the clock starts."""
        if self.stopped:
            raise ChildStopped(self.stopped)
        data = self.channel.encode(as_wire(command))
        try:
            started = time.perf_counter_ns()
            if thaw:
                self.thaw()
            self.channel.send_encoded(data)
            reply = self.channel.receive_until(self._deadline())
            while reply is not None and "build" in reply and len(reply) == 1:
                self._serve_build(reply["build"])
                reply = self.channel.receive_until(self._deadline())
            elapsed = time.perf_counter_ns() - started
        except ChannelClosed as exc:
            raise self._stop(f"closed: {exc}") from None
        if reply is None:
            raise self._stop("timeout")
        return elapsed, reply

    def _handled(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Serve what the child says on its own (hello, build requests); return anything else."""
        if "hello" in message:
            self.inner_pid = message["hello"] if type(message["hello"]) is int else None
            self.outcome.containment.update(self._facts())
        elif "build" in message:
            self._serve_build(message["build"])
        else:
            return message
        return None

    def _serve_build(self, request: Any) -> None:
        began = time.monotonic()
        try:
            reply = self.on_build(request) if self.on_build and isinstance(request, dict) else \
                {"ok": False, "error": "builds are not served to this process"}
            reply = self._own_copy(reply)
        except BuildDuringTiming as refused:
            reply = {"ok": False, "error": str(refused)}
        finally:
            self.paused_s += time.monotonic() - began
        self.channel.send({"built": reply})

    def _own_copy(self, reply: dict[str, Any]) -> dict[str, Any]:
        """The built binary copied into this child's scratch folder, where it loads it from: the build cache itself
        (every other candidate's binaries and logs) is hidden from the child."""
        folder, binary = reply.get("folder"), reply.get("binary")
        if not reply.get("ok") or not isinstance(folder, str) or not isinstance(binary, str):
            return reply
        source = Path(folder) / binary
        if not source.is_file():
            return reply
        own = self.scratch / "builds" / str(reply.get("sha256", "unknown"))[:16]
        own.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, own / source.name)
        return {**reply, "folder": str(own)}

    def _facts(self) -> dict[str, str]:
        try:
            import psutil

            from harness.isolation.jail import containment_facts

            inner = psutil.Process(self.proc.pid).children()
            return containment_facts(inner[0].pid if inner else self.proc.pid)
        except Exception:  # the child is gone already: nothing to record
            return {}

    # -- freezing and memory (the timing protocol: harness/measurement/frozen_calls.py) -------------------------

    def freeze(self) -> None:
        from harness.defences import is_off

        if is_off("freeze"):  # test-only: the process runs on while the parent writes its inputs
            return
        self.jailed.group.freeze()

    def thaw(self) -> None:
        self.jailed.group.thaw()

    def memory_pid(self) -> int | None:
        """The host pid of the process that answers this session (whose memory the parent reads), or None."""
        from harness.isolation.remote_memory import find_process

        if self.inner_pid is None:
            return None
        members = self.jailed.group.pids() or {self.proc.pid, *_descendants(self.proc.pid)}
        return find_process(members, self.inner_pid)

    # -- the end ---------------------------------------------------------------------------------------------

    def wait_exit(self) -> None:
        """Let the child finish on its own (serving builds), within its run clock."""
        try:
            while self.proc.poll() is None:
                if self.channel.ready(_POLL_S):
                    self._handled(self.channel.take())  # a batch child only speaks to ask for builds
                    continue
                self._watch()
        except (ChannelClosed, ChildStopped):
            pass

    def close(self) -> ChildOutcome:
        """Kill whatever is left (descendants, escaped forks), collect the exit status. Safe to call twice."""
        self.channel.close()
        # a child that answered `finish` exits on its own at once; anything left after that is killed
        return self.jailed.finish(grace_s=2 if not self.stopped else 0.01)


def _descendants(pid: int) -> set[int]:
    try:
        import psutil

        return {p.pid for p in psutil.Process(pid).children(recursive=True)}
    except Exception:  # gone already
        return set()


def run_child(scratch: Path, limits: Limits, prefix: list[str] | None = None,
              on_build: BuildHandler | None = None, role: str = "batch", forkable: bool = False) -> ChildOutcome:
    """Run the child to completion in batch mode (it reads its job and writes its result on its own)."""
    session = ChildSession(scratch, limits, role=role, on_build=on_build, prefix=prefix, forkable=forkable)
    try:
        session.wait_exit()
    finally:
        outcome = session.close()
    return outcome


def run_jailed(command: list[str], folder: Path, limits: Limits) -> ChildOutcome:
    """Run a non-conversing process (a build) in the jail with `folder` writable, to completion or its clock. A
    CPU timing never runs beside it (frozen, or waited for: see `_Jailed` and `harness/isolation/timing_slot.py`)."""
    jailed = _Jailed(command, folder, limits, folder / "process.log", build=True)
    while jailed.proc.poll() is None:
        if time.monotonic() - jailed.started > limits.timeout_s:
            jailed.outcome.timed_out = True
            break
        if jailed.over_memory():
            jailed.outcome.memory_exceeded = True
            break
        jailed.thaw_if_abandoned()
        time.sleep(_POLL_S)
    return jailed.finish(grace_s=0)
