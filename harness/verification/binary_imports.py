"""What a built library imports, read from the binary, not from the source text (issue 44): the C++ scan
(source_scan.py) is a pattern over text, and a macro (`#define FROM(op) torch::stable::op`, an operator's name
assembled by `#ns "::" #op`) writes PyTorch's compute under a name no pattern reads. The compiler resolves it: the
library's undefined dynamic symbols (binutils' `nm`) name the ATen operators (`at::_ops::mm::call`), the C shims
(`aoti_torch_aten_amax`) and the BLAS routines it calls, and where it imports the stable dispatcher
(`torch_call_dispatcher`) the operator names it passes are string constants in the binary. A name assembled at run
time is not in the binary: the compute census sees that call when it runs (harness/child/census.py), unless it
is a library function found through the run-time loader (dlopen, dlsym, dladdr: `runtime-linking`, refused).
Files, the network and the environment reached from C++ are read here too (`io`, refused), whatever the source
called them."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterable

from harness.records import Check, Finding
from harness.verification.bookkeeping import BOOKKEEPING

_ATEN = re.compile(r"^at::_ops::(\w+)::(?:call|redispatch)\b")
_SHIM = re.compile(r"^aoti_torch_(?:aten|cpu|cuda)_(\w+)$")
_BLAS = re.compile(r"^(?:cblas_\w+|[sdcz](?:gemm|gemv|symm|syrk|syr2k|trsm|trmm|ger|axpy|dot)_?|mkl_\w+|"
                   r"openblas_\w+|cublas\w+|cudnn\w+|cusparse\w+|cusolver\w+)$")
_DISPATCHER = {"torch_call_dispatcher", "aoti_torch_call_dispatcher"}
_NAMED_OP = re.compile(rb"aten::([a-z_][a-z0-9_]*)(?:\.[a-zA-Z_]+)?")
# Symbols that load a library, resolve a function or locate loaded code at run time (glibc's public and internal
# entry points, and the loader's own view of the loaded objects, which a hand-written walk of a library's symbol
# table starts from: dladdr's base address, dlinfo's link map, getauxval's program headers): a call found through
# them names nothing the linker or a scan of text can read. A kernel has no reason to find code at run time. The
# whole family is refused, not a list of its members (measured: none of the 127 .so files in the build caches on
# the dev machine, stable-ABI and torch/extension.h builds, imports one of them or of `_IO_NAMES`, but for the
# attack builds that were written to).
RUNTIME_LOADERS = {"dlopen", "dlmopen", "dlsym", "dlvsym", "__libc_dlopen_mode", "__libc_dlsym", "__libc_dlvsym",
                   "_dl_sym", "_dl_vsym", "dl_iterate_phdr", "_r_debug", "_dl_find_object", "dladdr", "dladdr1",
                   "dlinfo", "getauxval", "__getauxval"}
_LOADER_FAMILY = re.compile(r"^(?:dl\w*|_dl_\w+|__libc_dl\w+|_?_?getauxval|_?r_debug|_rtld_global\w*|__libc_stack_end"
                            r"|_DYNAMIC|_GLOBAL_OFFSET_TABLE_)$")
# Files, the network, other processes and the environment, reached from C++ through libc (POSIX or stdio) or the
# C++ library (file streams, std::filesystem): a kernel reads its tensors and nothing else. Read from the binary, so
# a wrapper the source scan's patterns do not name (`open(`, `__open_2`, `openat64`) is there all the same.
_IO_NAMES = {"open", "open64", "openat", "openat64", "__open_2", "__open64_2", "__openat_2", "__openat64_2", "creat",
             "creat64", "fopen", "fopen64", "freopen", "freopen64", "fdopen", "opendir", "fdopendir", "scandir",
             "read", "pread", "pread64", "readv", "preadv", "__read_chk", "__pread_chk", "readlink", "readlinkat",
             "__readlink_chk", "stat", "stat64", "lstat", "lstat64", "fstatat", "fstatat64", "statx", "__xstat",
             "__lxstat", "__fxstatat", "access", "faccessat", "realpath", "__realpath_chk", "name_to_handle_at",
             "open_by_handle_at", "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "send",
             "sendto", "sendmsg", "recv", "recvfrom", "recvmsg", "getaddrinfo", "gethostbyname", "getenv",
             "secure_getenv", "__secure_getenv", "__libc_secure_getenv", "environ", "__environ", "_environ",
             "setenv", "putenv", "unsetenv", "clearenv", "system", "popen", "fork", "vfork", "_Fork", "execve",
             "execv", "execvp", "execvpe", "execl", "execlp", "execle", "fexecve", "posix_spawn", "posix_spawnp",
             "clone", "clone3", "syscall", "ptrace", "process_vm_readv", "process_vm_writev", "mmap", "mmap64",
             "mprotect", "kill", "prctl", "unshare", "setns", "mount", "ioctl", "chdir", "getcwd", "sysctl"}
_IO_CXX = re.compile(r"^(?:std::(?:__cxx11::)?basic_(?:i|o)?fstream\b|std::(?:__cxx11::)?basic_filebuf\b"
                     r"|std::filesystem::|std::experimental::filesystem::)")
_NOT_COMPUTE = BOOKKEEPING | {"pad", "constant_pad_nd", "new_empty", "new_zeros", "empty_like", "fill_"}


def _compute(op: str) -> bool:
    """An operator (or an overload of one: `add_Tensor`, `empty_memory_format`) that is not bookkeeping."""
    parts = op.split("_")
    prefixes = {"_".join(parts[:i]) for i in range(1, len(parts) + 1)} | {op.rstrip("_"), op}
    return not (prefixes & _NOT_COMPUTE) and not op.startswith(("get_", "sym_", "is_"))


def imported_symbols(binary: Path) -> list[str] | None:
    """The binary's undefined dynamic symbols, demangled (None where `nm` is missing or cannot read it)."""
    nm = shutil.which("nm")
    if nm is None:
        return None
    try:  # the BSD format ("U name", demangled names hold spaces): every binutils reads it
        done = subprocess.run([nm, "-D", "--undefined-only", "--demangle", str(binary)],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    rows = [line.strip().split(" ", 1) for line in done.stdout.splitlines() if line.strip()]
    return [row[1].split("@")[0].strip() for row in rows if len(row) == 2]


def library_calls(binary: Path) -> list[str] | None:
    """PyTorch's compute and vendor libraries the binary calls, each as `what (how)`; None where unreadable."""
    symbols = imported_symbols(binary)
    if symbols is None:
        return None
    found: dict[str, None] = {}
    for symbol in symbols:
        aten, shim = _ATEN.match(symbol), _SHIM.match(symbol)
        if aten and _compute(aten.group(1)):
            found[f"aten::{aten.group(1)} (ATen)"] = None
        elif shim and _compute(shim.group(1)):
            found[f"{symbol} (PyTorch's C shim)"] = None
        elif _BLAS.match(symbol):
            found[f"{symbol} (a BLAS or vendor library)"] = None
    if _DISPATCHER & set(symbols):
        for name in sorted({m.group(1).decode() for m in _NAMED_OP.finditer(binary.read_bytes())}):
            if _compute(name):
                found[f"aten::{name} (through the stable dispatcher)"] = None
    return list(found)


def runtime_loading(symbols: Iterable[str]) -> list[str]:
    """The run-time loader's entry points among a binary's imported symbols (the whole family), sorted."""
    return sorted({s for s in symbols if s in RUNTIME_LOADERS or _LOADER_FAMILY.match(s)})


def io_access(symbols: Iterable[str]) -> list[str]:
    """Files, network, processes and the environment among a binary's imported symbols, sorted."""
    return sorted({s.split("(")[0].split("<")[0] for s in symbols if s in _IO_NAMES or _IO_CXX.match(s)})


def binary_findings(builds: Iterable[dict[str, Any]]) -> list[Finding]:
    """`runtime-linking` for each built binary that imports the run-time loader (refused: what it calls through it
    is named nowhere), `library-compute` for each that calls PyTorch's compute or a vendor library (what it decides
    is the registry's row: strict refuses it; otherwise the census and the work share judge what it costs)."""
    findings = []
    for build in builds:
        binary = Path(str(build.get("binary") or ""))
        if not build.get("binary") or not binary.is_file():
            continue
        symbols = imported_symbols(binary) or []
        loaders = runtime_loading(symbols)
        if loaders:
            findings.append(Finding(Check.RUNTIME_LINKING, f"the built library {binary.name} imports the run-time "
                                    f"loader ({', '.join(loaders)}, read from its binary): a function it loads or "
                                    "looks up at run time (a BLAS routine by a name built at run time) is named "
                                    "nowhere a check can read, and a kernel has no reason to load code; call what it "
                                    "needs directly, or compute it in the kernel"))
        io = io_access(symbols)
        if io:
            findings.append(Finding(Check.IO, f"the built library {binary.name} imports file, network, process or "
                                    f"environment access ({', '.join(io[:8])}, read from its binary): a kernel reads "
                                    "its tensors and nothing else"))
        calls = library_calls(binary)
        if calls:
            findings.append(Finding(Check.LIBRARY_COMPUTE, f"the built library {binary.name} imports PyTorch's compute "
                                    f"or a vendor library (read from its binary): {', '.join(calls[:8])}"))
    return findings
