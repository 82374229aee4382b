"""Compile-only CUDA (nvcc present, no GPU): compile what `load_inline`/`load` would build, with torch's own flags.

Catches compile errors early and reports registers, shared memory and spills per kernel, without a GPU. Like a
native build it is planned by the parent (`plan_compile_only`) and run in the jail as nothing but the compilers:
- nvcc compiles each CUDA source to a cubin (its front end still checks the whole file, host code included); the
  host half of `nvcc -c`, a second GCC pass over torch's headers that only a link would need, is skipped (116 s ->
  34 s for the bundled ReLU on 2 cores);
- at the same time the host compiler checks the C++ sources (the pybind bindings load_inline generates included)
  with `-fsyntax-only`, no link (that needs a CUDA build of torch). It uses kernelwright's precompiled torch header
  for its flags when one exists (`harness/compilation/pch.py`): 20.8 s -> 6.1 s for the ReLU's bindings.
The flags are the ones torch writes into its build.ninja for a CUDA extension (`-std=c++20` in torch 2.13, the
extension's name, the candidate's extra flags), so a candidate compiles here exactly when it compiles there, plus
one define that a CPU build of torch needs (it lacks c10's generated cuda_cmake_macros.h).
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path
from typing import Any

from harness.compilation.build_cache import LOG_NAME, read_log
from harness.compilation.compiler_report import parse_ptxas_report
from harness.compilation.native_build import (BUILD_FOLDER, NativePlan, header_key, ninja_variable, torch_ninja,
                                        write_sources)

CPU_TORCH_DEFINES = ("-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE",)
SCRIPT = "compile_only.sh"
CUBIN = "cuda.cubin"
_HOST_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++", ".C")
_MISSING_LIBRARY_HEADER = ("cublas", "cusparse", "cusolver", "cudnn", "nccl")


def plan_compile_only(work: Path, kind: str, name: str, arguments: dict[str, Any], arch: str,
                      pch_folder: Path | None) -> NativePlan:
    """Write the sources and a script that runs nvcc (device) and the host syntax check side by side; `cflags` is
    the host check's flags as the precompiled header's key, empty without host code."""
    build = work / BUILD_FOLDER
    sources = write_sources(build, kind, name, arguments)
    device = sorted(Path(s).name for s in sources if s.endswith(".cu"))
    host = sorted(Path(s).name for s in sources if s.endswith(_HOST_SUFFIXES))
    if kind == "inline" and not (arguments.get("cpp_sources") or arguments.get("functions")):
        host = []  # nothing but torch's header: no binding to check
    ensure_cuda_home()
    # an -arch flag among the extra ones makes torch add no -gencode of its own (it would query the GPU)
    ninja = torch_ninja(build, name, sources, arguments, pch_folder, with_cuda=True, extra=CPU_TORCH_DEFINES,
                        extra_cuda=(f"-arch={arch}", *CPU_TORCH_DEFINES))
    cflags = ninja_variable(ninja, "cflags")
    cuda_cflags = [flag for flag in shlex.split(ninja_variable(ninja, "cuda_cflags"))
                   if not (pch_folder and flag == f"-I{pch_folder}")]  # the header is for GCC only
    host_commands = [[*shlex.split(ninja_variable(ninja, "cxx")), *shlex.split(cflags), "-fsyntax-only", f]
                     for f in host]
    device_commands = [[ninja_variable(ninja, "nvcc"), *cuda_cflags, "-cubin", "-Xptxas", "-v", f, "-o",
                        _cubin_name(f, device)] for f in device]
    (build / SCRIPT).write_text(_script(host_commands, device_commands))
    return NativePlan(command=["sh", str(build / SCRIPT)], binary=f"{BUILD_FOLDER}/{CUBIN}",
                      cflags=header_key(cflags, name, pch_folder) if host else "")


def ensure_cuda_home() -> None:
    """A CPU build of torch has no CUDA_HOME: give it the toolkit torch would find on a CUDA build (CUDA_HOME or
    CUDA_PATH, else nvcc's folder on PATH), so that its ninja writer can plan a CUDA extension."""
    import torch.utils.cpp_extension as cpp

    if cpp.CUDA_HOME is None:
        home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
        nvcc = shutil.which("nvcc")
        if home is None and nvcc is None:
            raise RuntimeError("compile-only CUDA needs nvcc on PATH (or CUDA_HOME)")
        cpp.CUDA_HOME = home or str(Path(nvcc or "").parent.parent)


def _script(host_commands: list[list[str]], device_commands: list[list[str]]) -> str:
    """Host checks in the background, nvcc in the foreground; each side's log and exit status in its own file, and
    both logs in work/build.log."""
    def side(commands: list[list[str]], label: str) -> str:
        body = " && ".join(shlex.join(command) for command in commands) or "true"
        return f"( {body} ) > {label}.log 2>&1; echo $? > {label}.rc"

    return "\n".join(["cd \"$(dirname \"$0\")\"", f"( {side(host_commands, 'host')} ) &",
                      side(device_commands, "nvcc"), "wait", f"cat nvcc.log host.log > ../{LOG_NAME}", ""])


def compile_only_status(work: Path, arguments: dict[str, Any]) -> dict[str, Any]:
    """The parent's reading of a finished compile-only build."""
    build = work / BUILD_FOLDER
    host_log, device_log = read_log(build / "host.log"), read_log(build / "nvcc.log")
    host_rc, device_rc = _exit_status(build / "host.rc"), _exit_status(build / "nvcc.rc")
    if host_rc is None or device_rc is None:
        return {"ok": False, "error": "the compile-only build did not finish"}
    status: dict[str, Any] = {"ok": True, "binary": f"{BUILD_FOLDER}/{CUBIN}",
                              "is_python_module": bool(arguments.get("is_python_module", True)),
                              "resources": parse_ptxas_report(device_log)}
    if device_rc != 0 and not _missing_library_header(device_log):
        return {"ok": False, "error": f"nvcc failed (exit {device_rc}):\n{device_log[-8000:]}"}
    if host_rc != 0:
        return {"ok": False, "error": f"the host code does not compile:\n{host_log[-8000:]}"}
    if device_rc != 0:
        status["skipped"] = "a CUDA library header (cuBLAS/cuSPARSE/cuSOLVER...) is not installed here"
    elif not (build / CUBIN).is_file():
        status["skipped"] = "a host-only build: nothing to check for the GPU"
    if status.get("skipped"):
        (build / CUBIN).write_bytes(b"")
    return status


def _cubin_name(source: str, device: list[str]) -> str:
    """The first CUDA source's cubin is the build's binary (its kernels' report covers every source)."""
    return CUBIN if source == device[0] else f"{Path(source).stem}.cubin"


def _exit_status(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _missing_library_header(log: str) -> bool:
    return "No such file or directory" in log and any(lib in log.lower() for lib in _MISSING_LIBRARY_HEADER)
