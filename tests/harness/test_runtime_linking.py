"""`runtime-linking` on real binaries (no torch build): a shared library that reaches a function through the
run-time loader, even with the loader's entry points held in function pointers (the source never spells `dlsym(`),
imports them, and the binary says so; a plain loop beside it imports none. The full candidate (BLAS's sgemm_ through
dlsym, refused under strict and default) is in tests/harness/test_trust5_second_forms.py."""

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


def test_the_loaders_are_refused_at_every_user_level() -> None:
    assert runtime_loading(["memcpy", "__libc_dlsym", "dlmopen", "sgemm_"]) == ["__libc_dlsym", "dlmopen"]
    assert verdict_under(Check.RUNTIME_LINKING, "strict") is Verdict.REJECTED
    assert verdict_under(Check.RUNTIME_LINKING, "default") is Verdict.REJECTED
