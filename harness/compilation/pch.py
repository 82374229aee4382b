"""Precompiled torch/extension.h headers, kept in kernelwright's build cache (never in site-packages).

Measured on a 2-core machine (GCC 12, torch 2.13, `-O3 -fopenmp`): the bundled ReLU's main.cpp compiles in 34.8 s,
and in 17.0 s with a precompiled header; building the header takes 40-75 s and 790 MB. So a header is worth it
only for flags that come back: it is built in the background (a jailed compiler, one at a time per key, under a
file lock) when the second cold build with the same compiler and flags starts (the first, in a sweep or an agent
run), and every build after that uses it. A cold build that starts while the header is being built waits for it when
the header's expected remaining time is less than what it saves the build (`header_wait_s`, from the seconds this
cache measured for the header and for builds with and without it).

GCC looks for `torch/extension.h.gch` in each include folder before the header itself and uses it only when it
is valid for the command line (same flags, first include); otherwise it reads the real header (the folder holds a
link to it), so a stale or mismatched header can slow a build, never change it. Only the parent writes this cache
(every jailed process sees it read-only), and what a header contains follows from its key alone.
"""

from __future__ import annotations

import atexit
import fcntl
import functools
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path

from harness.compilation.compile_slots import compile_slot
from harness.isolation.sandbox import Limits
from harness.isolation.session import ChildStopped, run_jailed

HEADER = Path("torch") / "extension.h"
KEEP = 3  # headers kept (790 MB each); the least recently built go first
# until this cache has measured them: the header costs about 1.5 cold builds, and halves a build (see above)
_HEADER_COLD_BUILDS, _SAVED_FRACTION, _COLD_S = 1.5, 0.5, 35.0
_INCLUDE_FLAGS = ("-I", "-i", "--include", "--sysroot")  # flags that could make the header read other files
_running: set[threading.Thread] = set()


_many_builds = threading.Event()


def expect_many_builds() -> None:
    """This process will build many candidates (an executor's sweep, agent run or gate): in `auto` mode the first
    cold build with a set of flags starts their header, on the core a single build leaves idle."""
    _many_builds.set()


def mode() -> str:
    """KERNELWRIGHT_PCH: `auto` (default: build from a flag set's second cold build, or its first in a process
    that expects many builds), `eager` (from the first), or `off`."""
    value = os.environ.get("KERNELWRIGHT_PCH", "auto").lower()
    return value if value in ("auto", "eager", "off") else "auto"


@functools.cache
def compiler_identity() -> str:
    """The compiler torch would use, resolved, with its version: part of every key."""
    import torch.utils.cpp_extension as cpp

    compiler = cpp.get_cxx_compiler()
    path = shutil.which(compiler) or compiler
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        version = "unknown"
    return f"{os.path.realpath(path)}\n{version}"


def eligible(extra_cflags: list[str], extra_include_paths: list[str]) -> bool:
    return not extra_include_paths and not any(flag.strip().startswith(_INCLUDE_FLAGS) for flag in extra_cflags)


class PrecompiledHeaders:
    def __init__(self, cache_root: Path, limits: Limits) -> None:
        self.root = cache_root / "pch"
        self.limits = limits

    def key(self, cflags: str) -> str:
        import torch

        material = json.dumps([compiler_identity(), cflags, torch.__version__])
        return hashlib.sha256(material.encode()).hexdigest()[:32]

    def folder(self, cflags: str) -> Path | None:
        """A finished header for exactly these flags, or None."""
        folder = self.root / self.key(cflags)
        return folder if (folder / f"{HEADER}.gch").is_file() else None

    def note_cold_build(self, cflags: str) -> None:
        """Count a cold build (starting now) with these flags; start the header's build when they have come
        back."""
        if mode() == "off" or self.folder(cflags):
            return
        self.root.mkdir(parents=True, exist_ok=True)
        key = self.key(cflags)
        with open(self.root / f"{key}.seen", "ab") as seen:
            seen.write(b".")
            count = seen.tell()
        if count >= (1 if mode() == "eager" or _many_builds.is_set() else 2):
            thread = threading.Thread(target=self.build, args=(cflags,), name=f"pch-{key[:8]}", daemon=True)
            _running.difference_update([t for t in _running if not t.is_alive()])
            _running.add(thread)
            thread.start()

    def build(self, cflags: str) -> Path | None:
        """Build the header for `cflags` in the jail, unless another process is already at it."""
        key = self.key(cflags)
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{key}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return None  # another evaluation is building it
            if self.folder(cflags):
                return self.folder(cflags)
            started_file = self.root / f"{key}.started"
            started_file.unlink(missing_ok=True)  # not started while it waits for a compile slot
            with compile_slot("cpu"):
                started = time.time()
                started_file.write_text(f"{os.getpid()} {started!r}")  # who builds it, and since when
                try:
                    built = self._build_locked(key, cflags)
                except ChildStopped:  # Ctrl-C: no header, and no traceback from this background thread
                    return None
                finally:
                    started_file.unlink(missing_ok=True)
            if built is not None:
                self._measured(key, header_s=time.time() - started)
            return built

    # -- waiting for a header that is being built ------------------------------------------------------------

    def record_build(self, cflags: str, seconds: float, with_header: bool) -> None:
        """A successful build's seconds, for `header_wait_s` (the last one of each kind is kept)."""
        if mode() != "off":
            self._measured(self.key(cflags), **{"warm_s" if with_header else "cold_s": seconds})

    def header_wait_s(self, cflags: str) -> float | None:
        """The seconds a cold build starting now should wait for the header being built for its flags: its
        expected remaining time, when that is less than what the header saves the build; else None."""
        if mode() == "off":
            return None
        key = self.key(cflags)
        started = self._build_started(key)
        if started is None:
            return None
        times = self._times(key)
        cold_s = times.get("cold_s", _COLD_S)
        header_s = times.get("header_s", _HEADER_COLD_BUILDS * cold_s)
        saving = cold_s - times["warm_s"] if "warm_s" in times else _SAVED_FRACTION * cold_s
        remaining = max(header_s - (time.time() - started), 0.0)
        return remaining if remaining < saving else None

    def wait_for(self, cflags: str, seconds: float) -> Path | None:
        """The header once built, or None when its build ends without one or `seconds` pass first."""
        key, deadline = self.key(cflags), time.monotonic() + seconds
        while time.monotonic() < deadline and self.folder(cflags) is None and self._build_started(key) is not None:
            time.sleep(0.25)
        return self.folder(cflags)

    def _build_started(self, key: str) -> float | None:
        """When the header build for `key` under way now started; None if none is (its process unlinks the
        file when it ends, and one that was killed is no longer alive)."""
        try:
            pid, started = (self.root / f"{key}.started").read_text().split()
            os.kill(int(pid), 0)
        except PermissionError:  # alive, another user's
            pass
        except (OSError, ValueError):
            return None
        return float(started)

    def _times(self, key: str) -> dict[str, float]:
        try:
            measured = json.loads((self.root / f"{key}.times").read_text())
            return {k: float(v) for k, v in measured.items() if k in ("header_s", "cold_s", "warm_s")}
        except (OSError, ValueError, TypeError, AttributeError):
            return {}

    def _measured(self, key: str, **seconds: float) -> None:
        """Merge into the key's measured times; written whole and renamed, so a reader never sees half a file."""
        self.root.mkdir(parents=True, exist_ok=True)
        partial = self.root / f"{key}.times.{uuid.uuid4().hex[:8]}"
        try:
            partial.write_text(json.dumps({**self._times(key), **seconds}))
            partial.rename(self.root / f"{key}.times")
        except OSError:
            partial.unlink(missing_ok=True)

    def _build_locked(self, key: str, cflags: str) -> Path | None:
        import torch.utils.cpp_extension as cpp

        work = self.root / f"{key}.tmp-{uuid.uuid4().hex[:8]}"
        (work / HEADER.parent).mkdir(parents=True)
        real_header = Path(cpp.include_paths()[0]) / HEADER
        command = (f"{shlex.quote(cpp.get_cxx_compiler())} -x c++-header {shlex.quote(str(real_header))} "
                   f"-o {shlex.quote(str(work / HEADER))}.gch {cflags}")
        try:
            outcome = run_jailed(["sh", "-c", command], work, self.limits)
            if outcome.returncode != 0 or not (work / f"{HEADER}.gch").is_file():
                return None
            (work / HEADER).symlink_to(real_header)  # GCC falls back to the real header through this link
            (work / "process.log").unlink(missing_ok=True)
            final = self.root / key
            work.rename(final)
            self._evict()
            return final
        except OSError:
            return None
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _evict(self) -> None:
        headers = sorted((p for p in self.root.iterdir() if p.is_dir() and "." not in p.name),
                         key=lambda p: p.stat().st_mtime, reverse=True)
        for stale in headers[KEEP:]:
            shutil.rmtree(stale, ignore_errors=True)


@atexit.register
def _abandon_running_builds() -> None:
    """A background header build dies with the process that started it (its work folder is cleaned later)."""
    from harness.isolation.session import kill_live_processes

    if any(thread.is_alive() for thread in _running):
        kill_live_processes()
