"""The build cache is the parent's: entries carry a manifest with the binary's hash, checked at every load."""

from __future__ import annotations

import json
from pathlib import Path

from harness.build_service import MANIFEST, BuildService, sha256_of, validate
from harness.sandbox import Limits

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
