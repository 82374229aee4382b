"""`runtime-linking` on real binaries (no torch build): a shared library that reaches a function through the
run-time loader, even with the loader's entry points held in function pointers (the source never spells `dlsym(`),
imports them, and the binary says so; a plain loop beside it imports none. The full candidate (BLAS's sgemm_ through
dlsym, refused under strict and default) is in tests/harness/test_trust5_second_forms.py; BLAS found by walking a
loaded library's symbol table from dladdr, and POSIX file reads, in tests/harness/test_trust5_third_forms.py.

Further forms here (issue 44, third round): the loader's view of loaded code without dlopen or dlsym (the auxiliary
vector's program headers, dladdr1's link map), and files and the environment reached through function pointers
(`= open;`, `= getenv;`: no `open(` for the C++ scan to read) or through openat: each is in the binary's imports.
The control: a plain loop that prints, allocates, copies and calls libm imports none of them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.checks import verdict_under
from harness.records import Check, Verdict
from harness.verification.binary_imports import binary_findings, runtime_loading

_LOADER = r"""
#include <dlfcn.h>
typedef double (*unary)(double);
double call(double x) {
    void* (*open_library)(const char*, int) = dlopen;
    void* (*lookup)(void*, const char*) = dlsym;
    char name[4] = {'c', 'o', 's', 0};
    return ((unary)lookup(open_library("libm.so.6", RTLD_LAZY), name))(x);
}
"""
_VERSIONED = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
typedef double (*unary)(double);
double call(double x) { return ((unary)dlvsym(RTLD_DEFAULT, "cos", "GLIBC_2.2.5"))(x); }
"""
# the main program's own program headers from the auxiliary vector: where a walk of loaded code starts
_AUXV = r"""
#include <sys/auxv.h>
#include <link.h>
double call(double x) {
    const ElfW(Phdr)* headers = (const ElfW(Phdr)*)getauxval(AT_PHDR);
    return headers ? x + (double)headers[0].p_type : x;
}
"""
_LINK_MAP = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <math.h>
double call(double x) {
    Dl_info info;
    struct link_map* map = 0;
    dladdr1((void*)&cos, &info, (void**)&map, RTLD_DL_LINKMAP);
    return map ? x + (double)(map->l_addr != 0) : x;
}
"""
_OPEN_POINTER = r"""
#include <fcntl.h>
#include <unistd.h>
double call(double x) {
    int (*reach)(const char*, int, ...) = open;
    char buffer[64];
    int fd = reach("/proc/self/environ", O_RDONLY);
    return fd < 0 ? x : x + (double)read(fd, buffer, sizeof buffer);
}
"""
_GETENV_POINTER = r"""
#include <stdlib.h>
double call(double x) {
    char* (*look)(const char*) = getenv;
    const char* home = look("HOME");
    return home ? x + home[0] : x;
}
"""
_OPENAT = r"""
#define _GNU_SOURCE
#include <fcntl.h>
double call(double x) { return x + (double)openat(AT_FDCWD, "/etc/hostname", O_RDONLY); }
"""
_HONEST = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
double call(double x) {
    double* values = (double*)malloc(8 * sizeof(double));
    for (int i = 0; i < 8; ++i) values[i] = expf((float)(x * i));
    double copy[8];
    memcpy(copy, values, sizeof copy);
    free(values);
    printf("%f\n", copy[7]);
    fflush(stdout);
    return copy[3] + sqrt(x);
}
"""
_PLAIN = "double call(double x) { double s = 0; for (int i = 0; i < 8; ++i) s += x * i; return s; }\n"
needs_cc = pytest.mark.skipif(not (shutil.which("cc") and shutil.which("nm")), reason="needs cc and nm")


def _library(tmp_path: Path, name: str, source: str) -> Path:
    (tmp_path / f"{name}.c").write_text(source)
    out = tmp_path / f"{name}.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(out), str(tmp_path / f"{name}.c"), "-ldl"],
                   check=True, capture_output=True, timeout=60)
    return out


@needs_cc
@pytest.mark.parametrize("source", [_LOADER, _VERSIONED], ids=["dlopen-dlsym-pointers", "dlvsym"])
def test_a_binary_importing_the_run_time_loader_is_refused(tmp_path: Path, source: str) -> None:
    findings = binary_findings([{"binary": str(_library(tmp_path, "loader", source))}])
    tags = [f.check for f in findings]
    assert Check.RUNTIME_LINKING in tags, findings
    message = next(f.message for f in findings if f.check is Check.RUNTIME_LINKING)
    assert "dlsym" in message or "dlvsym" in message, message


@needs_cc
def test_a_plain_loop_imports_no_loader(tmp_path: Path) -> None:
    assert binary_findings([{"binary": str(_library(tmp_path, "plain", _PLAIN))}]) == []


@needs_cc
@pytest.mark.proves(Check.RUNTIME_LINKING)
@pytest.mark.parametrize("source,symbol", [(_AUXV, "getauxval"), (_LINK_MAP, "dladdr1")], ids=["auxv", "dladdr1"])
def test_a_binary_locating_loaded_code_is_refused(tmp_path: Path, source: str, symbol: str) -> None:
    """No dlopen, no dlsym: the loader's view of what is loaded is where a hand-written symbol walk starts."""
    findings = binary_findings([{"binary": str(_library(tmp_path, "locate", source))}])
    linking = [f.message for f in findings if f.check is Check.RUNTIME_LINKING]
    assert linking and symbol in linking[0], findings


@needs_cc
@pytest.mark.proves(Check.IO)
@pytest.mark.parametrize("source,symbol", [(_OPEN_POINTER, "open"), (_GETENV_POINTER, "getenv"),
                                           (_OPENAT, "openat")], ids=["open-pointer", "getenv-pointer", "openat"])
def test_a_binary_reaching_files_or_the_environment_is_refused(tmp_path: Path, source: str, symbol: str) -> None:
    """The C++ scan reads `open(`; a function pointer (`= open;`) writes none, and the binary imports it anyway."""
    findings = binary_findings([{"binary": str(_library(tmp_path, "reach", source))}])
    io = [f.message for f in findings if f.check is Check.IO]
    assert io and f"{symbol}," in io[0].replace(")", ","), findings
    assert verdict_under(Check.IO, "default") is Verdict.REJECTED


@needs_cc
def test_an_honest_library_that_prints_allocates_and_calls_libm_imports_nothing_refused(tmp_path: Path) -> None:
    assert binary_findings([{"binary": str(_library(tmp_path, "honest", _HONEST))}]) == []


def test_the_loaders_are_refused_at_every_user_level() -> None:
    assert runtime_loading(["memcpy", "__libc_dlsym", "dlmopen", "sgemm_"]) == ["__libc_dlsym", "dlmopen"]
    assert verdict_under(Check.RUNTIME_LINKING, "strict") is Verdict.REJECTED
    assert verdict_under(Check.RUNTIME_LINKING, "default") is Verdict.REJECTED
