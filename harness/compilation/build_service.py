"""Builds, owned by the parent. A candidate's `load_inline`/`load` call becomes a request to the parent, which
keys it by content, and either serves a verified build from the cache or builds it in a jailed build process that
never runs candidate Python. Only the parent writes the cache: each entry carries a manifest with the SHA-256 of
its binary, checked at every load, so no candidate can plant or swap a binary that another candidate loads.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

from harness.compilation.build_cache import LOG_NAME, build_key, read_log
from harness.compilation.cache_bounds import evict, folder_mb, touch
from harness.compilation.compile_slots import compile_slot
from harness.compilation.compiler_report import parse_ptxas_report
from harness.compilation.cuda_compile import compile_only_status, plan_compile_only
from harness.compilation.native_build import NativePlan, plan_native
from harness.compilation.pch import PrecompiledHeaders, eligible
from harness.isolation.sandbox import ChildOutcome, Limits
from harness.isolation.session import run_jailed
from harness.isolation.timing_slot import refuse_build_while_timing
from harness.records import Check, Finding

MANIFEST = "MANIFEST.json"
_ALLOWED = {"name", "cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags", "extra_ldflags",
            "extra_include_paths", "build_directory", "verbose", "with_cuda", "is_python_module", "sources",
            "with_pytorch_error_handling", "keep_intermediates", "use_pch", "no_implicit_headers", "is_standalone"}
_NOT_KEYED = ("name", "build_directory", "verbose", "use_pch", "keep_intermediates")
# flags that make the compiler or linker run code or read a toolchain of the candidate's choosing
_DANGEROUS_FLAGS = ("-fplugin", "-B", "-wrapper", "-specs", "--sysroot", "-iplugindir", "-Xclang", "-load",
                    "--compiler-bindir", "-ccbin")


_FILE_LIMIT = re.compile(r"File too large|File size limit exceeded")  # what a tool stopped by RLIMIT_FSIZE says


class BuildRejected(ValueError):
    """A request the parent refuses to build (its reason goes back to the candidate as a build error)."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _strings(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return list(value)
    raise BuildRejected(f"build argument of type {type(value).__name__} is not supported")


def validate(request: Any) -> tuple[str, dict[str, Any]]:
    if not isinstance(request, dict) or request.get("kind") not in ("inline", "load"):
        raise BuildRejected("malformed build request")
    arguments = request.get("arguments")
    if not isinstance(arguments, dict) or set(arguments) - _ALLOWED:
        raise BuildRejected(f"unsupported build arguments: {sorted(set(arguments or {}) - _ALLOWED)}")
    if arguments.get("is_standalone"):
        raise BuildRejected("is_standalone builds an executable, not a kernel module")
    for field in ("cpp_sources", "cuda_sources", "extra_cflags", "extra_cuda_cflags", "extra_ldflags",
                  "extra_include_paths", "functions"):
        _strings(arguments.get(field))
    for flag in _strings(arguments.get("extra_cflags")) + _strings(arguments.get("extra_cuda_cflags")) + \
            _strings(arguments.get("extra_ldflags")):
        if any(flag.startswith(bad) for bad in _DANGEROUS_FLAGS) or "-fplugin" in flag:
            raise BuildRejected(f"compiler flag {flag!r} is not allowed (it runs code of the candidate's choosing)")
    sources = arguments.get("sources")
    if request["kind"] == "load" and not (isinstance(sources, list) and all(
            isinstance(s, dict) and isinstance(s.get("name"), str) and isinstance(s.get("text"), str) for s in sources)):
        raise BuildRejected("load() sources could not be read")
    return request["kind"], arguments


class BuildService:
    """Serves one evaluation's build requests and records every build for the parent's report."""

    def __init__(self, cache_root: Path, mode: str, limits: Limits, extra_cuda_cflags: list[str] | None = None,
                 cuda_arch: str = "sm_90", max_builds: int = 8, budget_s: float = 1800.0, output_mb: int = 256,
                 cache_mb: int = 8192) -> None:
        import torch

        self.cache_root = cache_root
        self.mode = mode  # "native" or "nvcc-compile-only-<arch>": part of every key
        # a copy: the kernel stops any file of a candidate's build just past the cap (not the headers', 790 MB)
        self.limits = replace(limits, max_file_mb=min(limits.max_file_mb, output_mb + 1))
        self.extra_cuda_cflags = extra_cuda_cflags or []
        self.cuda_arch = cuda_arch
        self.torch_version = torch.__version__
        self.records: list[dict[str, Any]] = []
        self.max_builds, self.budget_s = max_builds, budget_s
        self.output_mb, self.cache_mb = output_mb, cache_mb  # one build's output; the cache's entries together
        self.limit_hit: Finding | None = None  # why builds were refused from some point on (the verdict's reason)
        self.headers = PrecompiledHeaders(cache_root, limits)
        remove_stale_builds(cache_root)  # work folders of builds whose parent was killed

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            kind, arguments = validate(request)
        except BuildRejected as exc:
            return {"ok": False, "error": str(exc)}
        cuda = bool(arguments.get("cuda_sources") or arguments.get("with_cuda"))
        if cuda:
            arguments["extra_cuda_cflags"] = _strings(arguments.get("extra_cuda_cflags")) + self.extra_cuda_cflags
        keyed = {k: v for k, v in arguments.items() if k not in _NOT_KEYED}
        key = build_key(f"{self.mode}:{kind}", keyed, self.torch_version)
        refused = self._over_limit(key)
        if refused:
            return {"ok": False, "error": refused.render()}
        record: dict[str, Any] = {"key": key, "requested_name": arguments.get("name"), "cuda": cuda,
                                  "folder": str(self.cache_root / key), "source_text": _source_text(keyed)[:200_000]}
        self.records.append(record)
        started = time.perf_counter()
        reply = self._cached(key, record) or self._build(kind, key, arguments, record)
        record["seconds"] = time.perf_counter() - started
        if reply.get("ok") and cuda and self.mode == "native":  # the judge reads the instruction mix
            from harness.feedback.sass import sass_mix

            record["sass"] = sass_mix(Path(record["binary"]))
        return reply

    def _over_limit(self, key: str) -> Finding | None:
        """Why a build of `key` is refused: too many distinct builds, or the builds' time spent. Once hit, every
        later request is refused too (a candidate that asks for build after build gets one clear verdict)."""
        if self.limit_hit is None:
            spent = sum(r.get("seconds", 0.0) for r in self.records)
            distinct = {r["key"] for r in self.records}
            if key not in distinct and len(distinct) >= self.max_builds:
                self.limit_hit = Finding(
                    Check.BUILD_LIMIT, f"the candidate requested more than {self.max_builds} distinct "
                    "builds (max_builds): build one extension (or a few) at import time")
            elif spent >= self.budget_s:
                self.limit_hit = Finding(Check.BUILD_LIMIT, f"the candidate's builds took {spent:.0f} s, its budget is "
                                         f"{self.budget_s:g} s (build_budget_s): no further build was started")
        return self.limit_hit

    def _cached(self, key: str, record: dict[str, Any]) -> dict[str, Any] | None:
        folder = self.cache_root / key
        try:
            manifest = json.loads((folder / MANIFEST).read_text())
            binary = folder / manifest["binary"]
            if sha256_of(binary) != manifest["sha256"]:
                record["cache_note"] = "cached binary did not match its manifest: rebuilt"
                shutil.rmtree(folder, ignore_errors=True)
                return None
        except (OSError, ValueError, KeyError, TypeError):
            return None
        record.update(cache_hit=True, log=read_log(folder / LOG_NAME)[-20000:])
        touch(folder)  # used now: the last to be evicted
        return _served(record, folder, manifest)

    def _build(self, kind: str, key: str, arguments: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
        self.cache_root.mkdir(parents=True, exist_ok=True)
        work = self.cache_root / f"{key}.tmp-{uuid.uuid4().hex[:8]}"
        work.mkdir()
        name = f"kw_{key[:24]}"
        record["cache_hit"] = False
        try:
            refuse_build_while_timing()  # before waiting for a slot that a build it froze may hold
            with ExitStack() as slot:
                try:
                    plan, header = slot.enter_context(self._planned_in_a_slot(work, kind, name, arguments, record))
                except (OSError, ValueError, TypeError, KeyError, RuntimeError) as exc:
                    return {"ok": False, "error": f"the build could not be planned: {exc}"}
                record.update(precompiled_header=header is not None, cflags=plan.cflags)
                if plan.cflags and header is None and self._header_fits(arguments):
                    self.headers.note_cold_build(plan.cflags)
                outcome = run_jailed(plan.command, work, self.limits)
            log = read_log(work / LOG_NAME) + read_log(work / "process.log")
            (work / LOG_NAME).write_text(log)
            record["log"] = log[-20000:]
            if outcome.timed_out:
                return {"ok": False, "error": f"the build timed out after {self.limits.timeout_s:g} s "
                        "(--build-timeout); every compiler process was killed", "log": log[-8000:]}
            status = (_native_status(work, plan.binary, outcome, log, bool(arguments.get("is_python_module", True)))
                      if self.mode == "native" else compile_only_status(work, arguments))
            written = folder_mb(work)  # a file stopped at the kernel's limit (EFBIG, SIGXFSZ) is over the cap too
            if written > self.output_mb or (not status.get("ok") and _FILE_LIMIT.search(log)):
                return {"ok": False, "error": f"the build wrote {written:.0f} MB or a file past the kernel's limit "
                        f"(the log says so), over the {self.output_mb} MB one "
                        "build may write (build_output_mb): a kernel's binary is a few MB; keep large tables out of "
                        "the source", "log": log[-8000:]}
            if not status.get("ok"):
                detail = status.get("error") or f"the build process died ({outcome.returncode})"
                return {"ok": False, "error": str(detail)[:8000], "log": log[-8000:]}
            if plan.cflags and self._header_fits(arguments):
                self.headers.record_build(plan.cflags, outcome.wall_s, with_header=header is not None)
            return self._promote(work, key, name, status, record)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _header_fits(self, arguments: dict[str, Any]) -> bool:
        return eligible(_strings(arguments.get("extra_cflags")), _strings(arguments.get("extra_include_paths")))

    @contextmanager
    def _planned_in_a_slot(self, work: Path, kind: str, name: str, arguments: dict[str, Any],
                           record: dict[str, Any]) -> Iterator[tuple[NativePlan, Path | None]]:
        """The build's plan, with one of the machine's compile slots held while the caller runs it. A cold build
        that does better waiting for the header being built for its flags waits for it (once) without a slot."""
        waited = False
        while True:
            with compile_slot("cuda-compile-only" if record["cuda"] else "cpu") as slot_wait_s:
                record["slot_wait_s"] = round(record.get("slot_wait_s", 0.0) + slot_wait_s, 2)
                plan, header = self._plan(work, kind, name, arguments)
                wait_s = None if header is not None or waited else self._header_wait_s(plan.cflags, arguments)
                if wait_s is None:
                    yield plan, header
                    return
            waited = True
            began = time.perf_counter()
            self.headers.wait_for(plan.cflags, 1.5 * wait_s + 5)  # room for an estimate a bit short
            record["header_wait_s"] = round(time.perf_counter() - began, 2)

    def _header_wait_s(self, cflags: str, arguments: dict[str, Any]) -> float | None:
        # compile-only CUDA: the host check runs beside nvcc, so a header saves it no wall time (34.2 -> 34.0 s)
        if self.mode != "native" or not cflags or not self._header_fits(arguments):
            return None
        return self.headers.header_wait_s(cflags)

    def _plan(self, work: Path, kind: str, name: str, arguments: dict[str, Any]) -> tuple[NativePlan, Path | None]:
        """torch's plan, with the precompiled header for its exact C++ flags first on the include path if one
        exists (compile-only CUDA: for the host check)."""
        plan = self._planned(work, kind, name, arguments, pch_folder=None)
        header = self.headers.folder(plan.cflags) if plan.cflags and self._header_fits(arguments) else None
        if header is not None:
            plan = self._planned(work, kind, name, arguments, pch_folder=header)
        return plan, header

    def _planned(self, work: Path, kind: str, name: str, arguments: dict[str, Any],
                 pch_folder: Path | None) -> NativePlan:
        if self.mode == "native":
            return plan_native(work, kind, name, arguments, pch_folder=pch_folder)
        return plan_compile_only(work, kind, name, arguments, self.cuda_arch, pch_folder=pch_folder)

    def _promote(self, work: Path, key: str, name: str, status: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
        """Copy the binary (a regular file inside the work folder, never a link) and the log into a fresh cache
        entry with a manifest."""
        source = work / str(status.get("binary", ""))
        if source.is_symlink() or not source.is_file() or not source.resolve().is_relative_to(work.resolve()):
            return {"ok": False, "error": "the build produced no binary"}
        binary_name = source.name
        entry = self.cache_root / f"{key}.new-{uuid.uuid4().hex[:8]}"
        entry.mkdir()
        shutil.copyfile(source, entry / binary_name)
        if (work / LOG_NAME).is_file():
            shutil.copyfile(work / LOG_NAME, entry / LOG_NAME)
        manifest = {"name": name, "binary": binary_name, "sha256": sha256_of(entry / binary_name),
                    "is_python_module": bool(status.get("is_python_module", True)),
                    "resources": status.get("resources"), "skipped": status.get("skipped")}
        (entry / MANIFEST).write_text(json.dumps(manifest))
        final = self.cache_root / key
        try:
            entry.rename(final)
        except OSError:  # a parallel evaluation finished the same build first: use its (verified) entry
            shutil.rmtree(entry, ignore_errors=True)
            cached = self._cached(key, record)
            if cached:
                return cached
            return {"ok": False, "error": "the build cache entry could not be written"}
        record["evicted"] = evict(self.cache_root, self.cache_mb, {r["key"] for r in self.records})
        return _served(record, final, manifest)


def _served(record: dict[str, Any], folder: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Note a verified entry in the parent's record and answer the child with it."""
    record.update(binary=str(folder / manifest["binary"]), sha256=manifest["sha256"],
                  resources=manifest.get("resources") or [])
    if manifest.get("skipped"):
        record["skipped"] = manifest["skipped"]
    return {"ok": True, "folder": str(folder), **manifest}


def remove_stale_builds(cache_root: Path, older_than_s: float = 6 * 3600) -> None:
    """Drop unfinished build folders left by killed evaluations."""
    if not cache_root.is_dir():
        return
    now = time.time()
    for pattern in ("*.tmp-*", "*.new-*", "pch/*.tmp-*"):
        for entry in cache_root.glob(pattern):
            try:
                if now - entry.stat().st_mtime > older_than_s:
                    shutil.rmtree(entry, ignore_errors=True)
            except OSError:
                continue


def _native_status(work: Path, binary: str, outcome: ChildOutcome, log: str, python_module: bool) -> dict[str, Any]:
    if outcome.returncode == 0 and (work / binary).is_file():  # a CUDA build's log carries ptxas's -v report
        return {"ok": True, "binary": binary, "is_python_module": python_module,
                "resources": parse_ptxas_report(log) or None}
    return {"ok": False, "error": f"Error building extension (ninja exit {outcome.returncode}):\n{log[-8000:]}"}


def _source_text(keyed: dict[str, Any]) -> str:
    """The code that was compiled (as the static policy re-scans it), and the flags it was compiled with."""
    parts: list[str] = []
    for field in ("cpp_sources", "cuda_sources", "extra_cflags", "extra_cuda_cflags", "extra_ldflags"):
        parts.extend(_strings(keyed.get(field)))
    parts.extend(s["text"] for s in keyed.get("sources") or [])
    return "\n".join(parts)
