"""Compile-only CUDA (nvcc present, no GPU): build the candidate's CUDA sources with torch's headers.

Catches compile errors early and reports registers, shared memory and spills per kernel, without a GPU. The
host C++ (the pybind bindings) is not compiled here: it needs a CUDA build of torch to link against.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from harness.build_cache import LOG_NAME, OK_MARKER, BuildFailed, CachedBuilder
from harness.compiler_report import parse_ptxas_report

_TORCH_CUDA_DEFINES = ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                       "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
                       "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE", "--expt-relaxed-constexpr"]
_IMPLICIT_HEADERS = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
_MISSING_LIBRARY_HEADER = ("cublas", "cusparse", "cusolver", "cudnn", "nccl")


class CompiledOnly:
    """Stands in for the extension module: the kernel built, but nothing can run without a GPU."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        raise RuntimeError(f"compile-only device: {self._name}.{attribute} cannot run without a GPU")


def nvcc_command(source: Path, output: Path, arch: str, extra_flags: list[str], include_paths: list[str]) -> list[str]:
    import torch.utils.cpp_extension as cpp

    includes = [*cpp.include_paths(), sysconfig.get_paths()["include"], *include_paths]
    return ["nvcc", "-c", str(source), "-o", str(output), "-std=c++17", f"-arch={arch}", "-Xptxas", "-v",
            "-Xcompiler", "-fPIC", *_TORCH_CUDA_DEFINES, *[f"-I{p}" for p in includes], *extra_flags]


class CompileOnlyBuilder(CachedBuilder):
    """Same cache and keys as real builds; the 'binary' is nvcc's object file and its resource report."""

    def __init__(self, cache_root: Path, recorder: Any, arch: str) -> None:
        super().__init__(cache_root, recorder)
        self.arch = arch
        self.mode = f"nvcc-compile-only-{arch}"

    def _load_finished(self, name: str, final: Path, arguments: dict[str, Any]) -> Any:
        self.recorder.builds[-1]["resources"] = parse_ptxas_report((final / LOG_NAME).read_text(errors="replace"))
        self.recorder.builds[-1]["binary"] = str(final / "cuda.o")
        return CompiledOnly(name)

    def _fresh_build(self, name: str, final: Path, arguments: dict[str, Any], real: Callable[..., Any],
                     record: dict[str, Any]) -> Any:
        sources = arguments.get("cuda_sources") or []
        sources = [sources] if isinstance(sources, str) else list(sources)
        if not sources:
            self.recorder.builds.pop()  # a host-only build: nothing to check for the GPU
            return CompiledOnly(name)
        work = self.cache_root / f"{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        work.mkdir(parents=True)
        header = [] if arguments.get("no_implicit_headers") else _IMPLICIT_HEADERS
        source = work / "cuda.cu"
        source.write_text("\n".join(header + sources))
        flags = list(arguments.get("extra_cuda_cflags") or [])
        command = nvcc_command(source, work / "cuda.o", self.arch, flags, arguments.get("extra_include_paths") or [])
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=work)
        log = done.stdout + done.stderr
        (work / LOG_NAME).write_text(log)
        record.update(cache_hit=False, log=log[-20000:], resources=parse_ptxas_report(log),
                      seconds=time.perf_counter() - started, binary=str(final / "cuda.o"))
        if done.returncode != 0:
            shutil.rmtree(work, ignore_errors=True)
            if _missing_library_header(log):
                record["skipped"] = "a CUDA library header (cuBLAS/cuSPARSE/cuSOLVER...) is not installed here"
                return CompiledOnly(name)
            raise BuildFailed(f"nvcc failed (exit {done.returncode}):\n{log[-8000:]}")
        (work / OK_MARKER).write_text(name)
        try:
            os.rename(work, final)
        except OSError:
            pass
        return CompiledOnly(name)


def _missing_library_header(log: str) -> bool:
    return "No such file or directory" in log and any(f"{lib}" in log.lower() for lib in _MISSING_LIBRARY_HEADER)
