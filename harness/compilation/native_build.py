"""A native build planned by the parent, run in the jail as nothing but `ninja` and the compiler.

The parent writes exactly what torch's `load_inline`/`load` would (main.cpp with torch's header, the candidate's
sources and the pybind bindings; cuda.cu with its implicit headers; torch's own build.ninja with torch's flags), so
the candidate sees the same semantics. The jailed process is the compiler itself: no interpreter and no torch
import per build (that cost 10 s of every cold build), and no candidate Python runs.

Where a precompiled torch header for the very same compiler and flags exists (`harness/compilation/pch.py`), its folder
is put first on the include path; GCC uses it only when it is valid for the command line, and falls back otherwise.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BUILD_FOLDER = "build"
_CUDA_SUFFIXES = (".cu", ".cuh")


@dataclass
class NativePlan:
    command: list[str]  # run in the jail with the work folder writable
    binary: str  # relative to the work folder
    cflags: str  # the C++ compile flags torch chose, as in build.ninja (without the extension's name)


def listed(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def inline_sources(name: str, arguments: dict[str, Any]) -> dict[str, str]:
    """The files `load_inline` writes: main.cpp (and cuda.cu), as torch 2.x generates them."""
    implicit = not arguments.get("no_implicit_headers")
    cpp = (["#include <torch/extension.h>"] if implicit else []) + listed(arguments.get("cpp_sources"))
    functions = arguments.get("functions")
    if functions is not None:
        if isinstance(functions, str):
            functions = [functions]
        named = functions if isinstance(functions, dict) else {f: f for f in functions}
        wrap = arguments.get("with_pytorch_error_handling", True)
        cpp.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        cpp += [f'm.def("{f}", torch::wrap_pybind_function({f}), "{doc}");' if wrap else f'm.def("{f}", {f}, "{doc}");'
                for f, doc in named.items()]
        cpp.append("}")
    files = {"main.cpp": "\n".join(cpp)}
    cuda = listed(arguments.get("cuda_sources"))
    if cuda:
        header = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"] if implicit else []
        files["cuda.cu"] = "\n".join(header + cuda)
    return files


def loaded_sources(arguments: dict[str, Any]) -> dict[str, str]:
    return {f"{index}_{Path(source['name']).name}": source["text"] for index, source in enumerate(arguments["sources"])}


def write_sources(build: Path, kind: str, name: str, arguments: dict[str, Any]) -> list[str]:
    """Write what load_inline / load would compile into `build`; the files' paths."""
    build.mkdir(parents=True, exist_ok=True)
    files = inline_sources(name, arguments) if kind == "inline" else loaded_sources(arguments)
    for file_name, text in files.items():
        (build / file_name).write_text(text)
    return [str(build / file_name) for file_name in files]


def torch_ninja(build: Path, name: str, sources: list[str], arguments: dict[str, Any], pch_folder: Path | None,
                with_cuda: bool, extra: tuple[str, ...] = (), extra_cuda: tuple[str, ...] = ()) -> str:
    """torch's own build.ninja for these sources (written to `build/build.ninja`), with the precompiled header's
    folder first on the include path; `extra`/`extra_cuda` go after the candidate's own flags."""
    import torch.utils.cpp_extension as cpp

    ldflags = cpp._prepare_ldflags(listed(arguments.get("extra_ldflags")), with_cuda, False, False, False)
    ninja_file = build / "build.ninja"
    cpp._write_ninja_file_to_build_library(
        path=str(ninja_file), name=name, sources=sources, extra_cflags=[*listed(arguments.get("extra_cflags")), *extra],
        extra_cuda_cflags=[*extra_cuda, *listed(arguments.get("extra_cuda_cflags"))], extra_sycl_cflags=[],
        extra_ldflags=ldflags, extra_include_paths=([str(pch_folder)] if pch_folder else [])
        + listed(arguments.get("extra_include_paths")), with_cuda=with_cuda, with_sycl=False, is_standalone=False)
    return ninja_file.read_text()


def header_key(cflags: str, name: str, pch_folder: Path | None) -> str:
    """torch's C++ flags as the precompiled header's key: without its folder and without the extension's name."""
    if pch_folder:
        cflags = cflags.replace(f"-I{pch_folder} ", "", 1)
    return cflags.replace(f"-DTORCH_EXTENSION_NAME={name} ", "")


def plan_native(work: Path, kind: str, name: str, arguments: dict[str, Any], pch_folder: Path | None) -> NativePlan:
    """Write the sources and torch's build.ninja into `work/build`; return the command that builds them."""
    build = work / BUILD_FOLDER
    sources = write_sources(build, kind, name, arguments)
    with_cuda = arguments.get("with_cuda")
    if with_cuda is None:
        with_cuda = any(s.endswith(_CUDA_SUFFIXES) for s in sources)
    cflags = ninja_variable(torch_ninja(build, name, sources, arguments, pch_folder, with_cuda), "cflags")
    jobs = "1" if len(sources) == 1 else str(os.cpu_count() or 1)
    return NativePlan(command=[ninja_binary(), "-v", "-j", jobs, "-C", str(build)], binary=f"{BUILD_FOLDER}/{name}.so",
                      cflags=header_key(cflags, name, pch_folder))


def ninja_variable(text: str, variable: str) -> str:
    for line in text.splitlines():
        if line.startswith(f"{variable} = "):
            return line[len(variable) + 3:]
    return ""


def ninja_binary() -> str:
    """ninja beside the interpreter (the `ninja` wheel), else on PATH."""
    beside = Path(sys.executable).parent / "ninja"
    found = str(beside) if beside.is_file() else shutil.which("ninja")
    if not found:
        raise RuntimeError("ninja is required to build C++ extensions: pip install ninja")
    return found
