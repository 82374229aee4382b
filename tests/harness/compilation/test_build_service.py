"""The build cache is the parent's: entries carry a manifest with the binary's hash, checked at every load."""

from __future__ import annotations

import json
from pathlib import Path

from harness.compilation.build_service import MANIFEST, BuildService, sha256_of, validate
from harness.isolation.sandbox import Limits

import pytest


def _service(root: Path) -> BuildService:
    return BuildService(root, "native", Limits(timeout_s=5, memory_mb=1024, address_space_limit=False))


def test_a_planted_or_swapped_binary_is_never_served(tmp_path: Path) -> None:
    service = _service(tmp_path)
    entry = tmp_path / "somekey"
    entry.mkdir()
    (entry / "kw.so").write_bytes(b"honest")
    (entry / MANIFEST).write_text(json.dumps({"name": "kw", "binary": "kw.so", "sha256": sha256_of(entry / "kw.so")}))
    assert service._cached("somekey", {})["sha256"] == sha256_of(entry / "kw.so")
    (entry / "kw.so").write_bytes(b"poisoned")  # what a candidate with write access would do
    record: dict = {}
    assert service._cached("somekey", record) is None and "did not match" in record["cache_note"]
    assert not entry.exists()


def test_a_folder_without_a_manifest_is_not_a_build(tmp_path: Path) -> None:
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "kw.so").write_bytes(b"planted")
    assert _service(tmp_path)._cached("k", {}) is None


@pytest.mark.parametrize("flag", ["-fplugin=/tmp/evil.so", "-B/tmp/toolchain", "-wrapper", "-specs=/tmp/x"])
def test_flags_that_run_code_of_the_candidates_choosing_are_refused(flag: str) -> None:
    request = {"kind": "inline", "arguments": {"name": "x", "cpp_sources": "int f();", "extra_cflags": [flag]}}
    with pytest.raises(ValueError, match="not allowed"):
        validate(request)


class _Instant(BuildService):
    """Builds that take `seconds` and never run a compiler: only the caps are under test."""

    seconds = 0.0

    def _build(self, kind, key, arguments, record):
        import time

        time.sleep(self.seconds)
        return {"ok": True}


def _request(source: str) -> dict:
    return {"kind": "inline", "arguments": {"name": "x", "cpp_sources": source, "functions": ["f"]}}


def test_distinct_builds_past_the_cap_are_refused_and_stay_refused(tmp_path: Path) -> None:
    service = _Instant(tmp_path, "native", Limits(timeout_s=5, memory_mb=1024, address_space_limit=False),
                       max_builds=2)
    assert service(_request("int f() { return 1; }"))["ok"]
    assert service(_request("int f() { return 2; }"))["ok"]
    assert service(_request("int f() { return 1; }"))["ok"]  # the same source again is not another build
    refused = service(_request("int f() { return 3; }"))
    assert not refused["ok"] and "[build-limit]" in refused["error"] and "max_builds" in refused["error"]
    assert not service(_request("int f() { return 1; }"))["ok"]  # once hit, every later request is refused


def test_builds_past_their_time_budget_are_refused(tmp_path: Path) -> None:
    service = _Instant(tmp_path, "native", Limits(timeout_s=5, memory_mb=1024, address_space_limit=False),
                       budget_s=0.1)
    service.seconds = 0.12
    assert service(_request("int f() { return 1; }"))["ok"]
    refused = service(_request("int f() { return 2; }"))
    assert not refused["ok"] and "build_budget_s" in refused["error"]
