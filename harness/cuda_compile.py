"""Compile-only CUDA (nvcc present, no GPU): build the candidate's CUDA sources with torch's headers.

Catches compile errors early and reports registers, shared memory and spills per kernel, without a GPU. nvcc
compiles the device side to a cubin (its front end still checks the whole file, host code included); the host
half of `nvcc -c`, a second GCC pass over torch's headers that only a link would need, is skipped: 116 s -> 34 s
for the bundled ReLU on 2 cores. The host C++ (the sources plus the pybind bindings load_inline generates) is
checked by the host compiler at the same time, without linking (that needs a CUDA build of torch).
"""

from __future__ import annotations

import subprocess
import sysconfig
from pathlib import Path
from typing import Any

from harness.build_cache import LOG_NAME
from harness.compiler_report import parse_ptxas_report
from harness.native_build import inline_sources

_TORCH_CUDA_DEFINES = ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                       "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
                       "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE", "--expt-relaxed-constexpr"]
_MISSING_LIBRARY_HEADER = ("cublas", "cusparse", "cusolver", "cudnn", "nccl")


def nvcc_command(source: Path, output: Path, arch: str, extra_flags: list[str], include_paths: list[str]) -> list[str]:
    import torch.utils.cpp_extension as cpp

    includes = [*cpp.include_paths(), sysconfig.get_paths()["include"], *include_paths]
    return ["nvcc", "-cubin", str(source), "-o", str(output), "-std=c++17", f"-arch={arch}", "-Xptxas", "-v",
            "-Xcompiler", "-fPIC", *_TORCH_CUDA_DEFINES, *[f"-I{p}" for p in includes], *extra_flags]


def _host_check(work: Path, name: str, arguments: dict[str, Any], main_cpp: str) -> subprocess.Popen[str] | None:
    """Start compiling the host binding (syntax and types, no link): a binding that cannot build fails here too."""
    import torch.utils.cpp_extension as cpp

    if not (arguments.get("cpp_sources") or arguments.get("functions")):
        return None
    source = work / "main.cpp"
    source.write_text(main_cpp)
    includes = [*cpp.include_paths(), sysconfig.get_paths()["include"]]
    command = ["c++", "-fsyntax-only", "-std=c++17", f"-DTORCH_EXTENSION_NAME={name}", "-DTORCH_API_INCLUDE_EXTENSION_H",
               *[f"-I{p}" for p in includes], str(source)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=work)


def compile_only(work: Path, name: str, arguments: dict[str, Any], arch: str) -> dict[str, Any]:
    """Compile what load_inline would build, without a GPU: nvcc for the CUDA sources (with its resource
    report) and, at the same time, the host compiler for the binding. Runs in the build process; writes its log
    to work/build.log."""
    files = inline_sources(name, arguments)  # exactly what load_inline would compile
    host = _host_check(work, name, arguments, files["main.cpp"])
    try:
        status = _device_side(work, arguments, arch, files.get("cuda.cu"))
    finally:
        host_log = host.communicate()[0] if host else ""
    with open(work / LOG_NAME, "a") as log_file:
        log_file.write(host_log)
    if status.get("ok") and host and host.returncode != 0:
        return {"ok": False, "error": f"the host binding does not compile:\n{host_log[-8000:]}"}
    return status


def _device_side(work: Path, arguments: dict[str, Any], arch: str, cuda_cu: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {"ok": True, "binary": "cuda.cubin", "is_python_module": True}
    if cuda_cu is None:
        (work / "cuda.cubin").write_bytes(b"")
        status["skipped"] = "a host-only build: nothing to check for the GPU"
        return status
    source = work / "cuda.cu"
    source.write_text(cuda_cu)
    flags = list(arguments.get("extra_cuda_cflags") or [])
    command = nvcc_command(source, work / "cuda.cubin", arch, flags, arguments.get("extra_include_paths") or [])
    done = subprocess.run(command, capture_output=True, text=True, cwd=work)
    log = done.stdout + done.stderr
    (work / LOG_NAME).write_text(log)
    status["resources"] = parse_ptxas_report(log)
    if done.returncode != 0:
        if _missing_library_header(log):
            status["skipped"] = "a CUDA library header (cuBLAS/cuSPARSE/cuSOLVER...) is not installed here"
            (work / "cuda.cubin").write_bytes(b"")
            return status
        return {"ok": False, "error": f"nvcc failed (exit {done.returncode}):\n{log[-8000:]}"}
    return status


def _missing_library_header(log: str) -> bool:
    return "No such file or directory" in log and any(f"{lib}" in log.lower() for lib in _MISSING_LIBRARY_HEADER)
