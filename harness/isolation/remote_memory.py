"""The parent reads a child's memory itself (`process_vm_readv`), so no harness code in the candidate's process
packs an output or answers a probe that the parent then trusts. Used while the child's process tree is frozen:
what is read is what the memory held when the call returned. (Inputs go the other way through a shared file:
harness/isolation/shared_slots.py.)

Linux only; `available()` says whether this machine lets the parent reach its children's memory (a seccomp
profile or Yama's ptrace_scope=3 may not)."""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import sys
from pathlib import Path

_IOV_MAX = 1024
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


class RemoteMemoryError(Exception):
    """The child's memory could not be read at the addresses it named (a lie or a dead process)."""


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


def _transfer(pid: int, local: list[tuple[int, int]], remote: list[tuple[int, int]]) -> int:
    call = _libc.process_vm_readv
    done = 0
    for start in range(0, max(len(local), len(remote)), _IOV_MAX):
        mine, theirs = local[start:start + _IOV_MAX], remote[start:start + _IOV_MAX]
        local_v = (_Iovec * len(mine))(*[_Iovec(a, n) for a, n in mine])
        remote_v = (_Iovec * len(theirs))(*[_Iovec(a, n) for a, n in theirs])
        moved = call(pid, local_v, len(mine), remote_v, len(theirs), 0)
        wanted = sum(n for _, n in theirs)
        if moved != wanted:
            code = ctypes.get_errno() if moved < 0 else errno.EFAULT
            raise RemoteMemoryError(f"read {max(moved, 0)} of {wanted} bytes of "
                                    f"process {pid}: {os.strerror(code)}")
        done += moved
    return done


def read(pid: int, address: int, nbytes: int) -> bytearray:
    """`nbytes` at `address` of process `pid`."""
    buffer = bytearray(nbytes)
    if nbytes:
        holder = (ctypes.c_char * nbytes).from_buffer(buffer)
        _transfer(pid, [(ctypes.addressof(holder), nbytes)], _chunks(address, nbytes))
    return buffer


def gather(pid: int, addresses: list[int], itemsize: int) -> bytearray:
    """`itemsize` bytes at each of `addresses`, concatenated (one system call per 1024 addresses)."""
    buffer = bytearray(itemsize * len(addresses))
    if addresses:
        base = ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))
        _transfer(pid, [(base, len(buffer))], [(a, itemsize) for a in addresses])
    return buffer


def _chunks(address: int, nbytes: int, size: int = 1 << 30) -> list[tuple[int, int]]:
    return [(address + offset, min(size, nbytes - offset)) for offset in range(0, nbytes, size)]


def namespace_pid(pid: int) -> int | None:
    """The pid `pid` has inside its own (innermost) PID namespace, from /proc/PID/status."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def find_process(candidates: set[int], inner_pid: int) -> int | None:
    """Which of `candidates` (host pids: a cgroup's members) is the process that calls itself `inner_pid`. The
    jail's launcher stays outside the namespace, so the innermost pid tells it from the child it started."""
    matches = [pid for pid in sorted(candidates) if namespace_pid(pid) == inner_pid and
               (pid == inner_pid or _nested(pid))]
    return matches[0] if matches else None


def _nested(pid: int) -> bool:
    try:
        line = next(l for l in Path(f"/proc/{pid}/status").read_text().splitlines() if l.startswith("NSpid:"))
    except (OSError, StopIteration):
        return False
    return len(line.split()) > 2


@functools.cache
def available() -> bool:
    """Whether this process may read its own children's memory here (probed on a forked child)."""
    if _libc is None:
        return False
    marker = ctypes.create_string_buffer(b"kernelwright")
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child waits until the parent has read
        os.close(write_fd)
        os.read(read_fd, 1)
        os._exit(0)
    os.close(read_fd)
    try:
        return bytes(read(pid, ctypes.addressof(marker), 12)) == b"kernelwright"
    except RemoteMemoryError:
        return False
    finally:
        os.close(write_fd)
        os.waitpid(pid, 0)
