"""Native builds planned by the parent and run in the jail as ninja + compiler; precompiled headers on the side.
The real builds here skip torch's header (`no_implicit_headers`), so each compiles in about a second."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import pch
from harness.build_service import BuildService
from harness.native_build import inline_sources, plan_native
from harness.pch import PrecompiledHeaders, eligible
from harness.sandbox import Limits

LIMITS = Limits(timeout_s=120, memory_mb=4096, address_space_limit=False)
PLAIN_CPP = 'extern "C" int answer() { return 42; }'


def test_main_cpp_is_what_load_inline_writes() -> None:
    files = inline_sources("ext", {"cpp_sources": ["int f(int);", "int g();"], "functions": {"f": "doc of f"},
                                   "cuda_sources": "__global__ void k() {}"})
    main = files["main.cpp"].splitlines()
    assert main[0] == "#include <torch/extension.h>" and main[1:3] == ["int f(int);", "int g();"]
    assert 'm.def("f", torch::wrap_pybind_function(f), "doc of f");' in main
    assert files["cuda.cu"].startswith("#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n")
    bare = inline_sources("ext", {"cpp_sources": "int f();", "functions": "f", "no_implicit_headers": True,
                                  "with_pytorch_error_handling": False})
    assert bare["main.cpp"].startswith("int f();") and 'm.def("f", f, "f");' in bare["main.cpp"]


def test_the_plan_is_torchs_ninja_file_with_the_header_folder_first(tmp_path: Path) -> None:
    header = tmp_path / "pch" / "abc"
    plan = plan_native(tmp_path / "work", "inline", "kw_x", {"cpp_sources": "int f();", "extra_cflags": ["-O3"]},
                       pch_folder=header)
    ninja = (tmp_path / "work" / "build" / "build.ninja").read_text()
    cflags_line = next(line for line in ninja.splitlines() if line.startswith("cflags = "))
    assert cflags_line.index(f"-I{header}") < cflags_line.index("-isystem")  # searched before torch's own
    assert "-DTORCH_EXTENSION_NAME=kw_x" in cflags_line and "-ltorch" in ninja
    assert "TORCH_EXTENSION_NAME" not in plan.cflags and str(header) not in plan.cflags and "-O3" in plan.cflags
    assert plan.command[1:] == ["-v", "-j", "1", "-C", str(tmp_path / "work" / "build")]


def test_a_native_build_runs_in_the_jail_and_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWRIGHT_PCH", "off")
    service = BuildService(tmp_path, "native", LIMITS)
    request = {"kind": "inline", "arguments": {"name": "answer", "cpp_sources": PLAIN_CPP,
                                               "no_implicit_headers": True, "is_python_module": False}}
    first = service(request)
    assert first["ok"], first
    assert Path(first["folder"], first["binary"]).is_file() and first["is_python_module"] is False
    assert service(request)["ok"] and service.records[-1]["cache_hit"] is True
    broken = {"kind": "inline", "arguments": {"name": "answer", "cpp_sources": "int broken( {",
                                              "no_implicit_headers": True}}
    failed = service(broken)
    assert not failed["ok"] and "error" in failed["error"].lower() and "main.cpp" in failed["error"]


def test_headers_are_only_built_for_flags_that_come_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWRIGHT_PCH", "auto")
    started: list[str] = []
    monkeypatch.setattr(PrecompiledHeaders, "build", lambda self, cflags: started.append(cflags))
    headers = PrecompiledHeaders(tmp_path, LIMITS)
    headers.note_cold_build("-O3 -fopenmp")
    assert started == []  # once is not a habit
    headers.note_cold_build("-O2")
    headers.note_cold_build("-O3 -fopenmp")
    for thread in list(pch._running):
        thread.join(5)
    assert started == ["-O3 -fopenmp"]
    monkeypatch.setenv("KERNELWRIGHT_PCH", "off")
    headers.note_cold_build("-O2")
    assert started == ["-O3 -fopenmp"]


def test_a_header_is_found_only_for_its_exact_flags(tmp_path: Path) -> None:
    headers = PrecompiledHeaders(tmp_path, LIMITS)
    folder = tmp_path / "pch" / headers.key("-O3")
    (folder / "torch").mkdir(parents=True)
    assert headers.folder("-O3") is None  # no header file yet: an unfinished build is never used
    (folder / "torch" / "extension.h.gch").write_bytes(b"gpch")
    assert headers.folder("-O3") == folder and headers.folder("-O2") is None
    assert headers.key("-O3") != headers.key("-O3 -ffast-math")


@pytest.mark.parametrize(("cflags", "includes", "fits"), [
    (["-O3", "-fopenmp"], [], True), (["-I/tmp/shadow"], [], False), (["-include", "x.h"], [], False),
    (["-O3"], ["/tmp/includes"], False), (["-isystem/tmp/x"], [], False)])
def test_flags_that_could_change_what_the_header_reads_get_no_header(cflags: list[str], includes: list[str],
                                                                     fits: bool) -> None:
    assert eligible(cflags, includes) is fits


def test_the_header_build_is_one_at_a_time(tmp_path: Path) -> None:
    import fcntl

    headers = PrecompiledHeaders(tmp_path, LIMITS)
    (tmp_path / "pch").mkdir()
    with open(tmp_path / "pch" / f"{headers.key('-O3')}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another evaluation is at it
        assert headers.build("-O3") is None
    assert not [p for p in (tmp_path / "pch").iterdir() if ".tmp-" in p.name]
    assert os.listdir(tmp_path / "pch") == [f"{headers.key('-O3')}.lock"]
