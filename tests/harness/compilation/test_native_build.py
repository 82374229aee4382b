"""Native builds planned by the parent and run in the jail as ninja + compiler; precompiled headers on the side.
The real builds here skip torch's header (`no_implicit_headers`), so each compiles in about a second."""

from __future__ import annotations

import fcntl
import os
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from harness.compilation import pch
from harness.compilation.build_service import BuildService
from harness.compilation.native_build import inline_sources, plan_native
from harness.compilation.pch import PrecompiledHeaders, eligible
from harness.isolation.sandbox import Limits

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
    monkeypatch.setenv("KERNELWRIGHT_PCH", "auto")
    pch.expect_many_builds()  # a sweep or an agent run: the first cold build is enough
    headers.note_cold_build("-O1")
    for thread in list(pch._running):
        thread.join(5)
    assert started == ["-O3 -fopenmp", "-O1"]


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
    headers = PrecompiledHeaders(tmp_path, LIMITS)
    (tmp_path / "pch").mkdir()
    with open(tmp_path / "pch" / f"{headers.key('-O3')}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another evaluation is at it
        assert headers.build("-O3") is None
    assert not [p for p in (tmp_path / "pch").iterdir() if ".tmp-" in p.name]
    assert os.listdir(tmp_path / "pch") == [f"{headers.key('-O3')}.lock"]


@contextmanager
def _header_being_built(headers: PrecompiledHeaders, cflags: str, started_s_ago: float,
                        pid: int | None = None) -> Iterator[Path]:
    """What a header build under way leaves for others to read (its process, when it started), until it ends."""
    headers.root.mkdir(parents=True, exist_ok=True)
    started = headers.root / f"{headers.key(cflags)}.started"
    started.write_text(f"{pid or os.getpid()} {time.time() - started_s_ago!r}")
    try:
        yield started
    finally:
        started.unlink(missing_ok=True)


def _finish_header(headers: PrecompiledHeaders, cflags: str, after_s: float) -> threading.Thread:
    def finish() -> None:
        time.sleep(after_s)
        folder = headers.root / headers.key(cflags) / "torch"
        folder.mkdir(parents=True)
        (folder / "extension.h.gch").write_bytes(b"gpch")

    thread = threading.Thread(target=finish)
    thread.start()
    return thread


def test_a_cold_build_waits_for_a_header_only_when_it_is_nearly_done(tmp_path: Path) -> None:
    headers = PrecompiledHeaders(tmp_path, LIMITS)
    headers.record_build("-O3", 36.0, with_header=False)
    headers.record_build("-O3", 17.0, with_header=True)  # the header saves 19 s
    headers._measured(headers.key("-O3"), header_s=45.0)
    assert headers.header_wait_s("-O3") is None  # nobody is building it
    with _header_being_built(headers, "-O3", started_s_ago=5):
        assert headers.header_wait_s("-O3") is None  # 40 s left: building without it is sooner
    with _header_being_built(headers, "-O3", started_s_ago=35):
        assert 9 < headers.header_wait_s("-O3") < 11
        assert headers.header_wait_s("-O2") is None  # other flags, other header
    with _header_being_built(headers, "-O3", started_s_ago=35):
        finishing = _finish_header(headers, "-O3", after_s=0.5)
        assert headers.wait_for("-O3", 10) == headers.folder("-O3") is not None
        finishing.join()


@pytest.mark.timing
def test_waiting_ends_when_the_header_build_ends_without_a_header(tmp_path: Path) -> None:
    headers = PrecompiledHeaders(tmp_path, LIMITS)
    with _header_being_built(headers, "-O3", started_s_ago=0) as started:
        began = time.monotonic()
        threading.Timer(0.5, started.unlink).start()  # the header's compiler failed: its build ended
        assert headers.wait_for("-O3", 30) is None and time.monotonic() - began < 5


def test_a_header_build_whose_process_was_killed_is_not_waited_for(tmp_path: Path) -> None:
    headers = PrecompiledHeaders(tmp_path, LIMITS)
    headers._measured(headers.key("-O3"), cold_s=36.0, warm_s=17.0, header_s=45.0)
    gone = subprocess.Popen(["true"])
    gone.wait()
    with _header_being_built(headers, "-O3", started_s_ago=40, pid=gone.pid):
        assert headers.header_wait_s("-O3") is None
    with _header_being_built(headers, "-O3", started_s_ago=40):  # the same, alive: 5 s left, worth waiting
        assert 4 < headers.header_wait_s("-O3") < 6


def test_a_build_waits_for_the_header_being_built_and_uses_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWRIGHT_PCH", "auto")
    monkeypatch.setattr(PrecompiledHeaders, "note_cold_build", lambda self, cflags: None)
    service = BuildService(tmp_path, "native", LIMITS)
    arguments = {"name": "answer", "cpp_sources": PLAIN_CPP, "no_implicit_headers": True, "is_python_module": False}
    assert service({"kind": "inline", "arguments": dict(arguments)})["ok"]
    cflags = service.records[-1]["cflags"]
    with _header_being_built(service.headers, cflags, started_s_ago=3600):  # overdue: it must be nearly done
        finishing = _finish_header(service.headers, cflags, after_s=1.0)
        reply = service({"kind": "inline", "arguments": {**arguments, "cpp_sources": PLAIN_CPP + " // 2"}})
        finishing.join()
    record = service.records[-1]
    assert reply["ok"] and record["precompiled_header"] is True and 0.5 < record["header_wait_s"] < 6
