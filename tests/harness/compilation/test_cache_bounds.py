"""Bounded build artifacts (issue 44 item 6, harness/compilation/cache_bounds.py): a build that writes more than
`build_output_mb` is a compile error (a 300 MB table in the source left 2 x 301 MB in the cache on e19f4ec), and
the cache keeps under `build_cache_mb` by evicting the entries used longest ago, never the running evaluation's.
The real builds skip torch's header, so each compiles in about a second."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from harness.compilation.build_service import BuildService
from harness.compilation.cache_bounds import GRACE_S, evict, folder_mb
from harness.isolation.sandbox import Limits

LIMITS = Limits(timeout_s=120, memory_mb=4096, address_space_limit=False)
PLAIN_CPP = 'extern "C" int answer() { return 42; }'
# two ways to make a 24 MB binary: an initialised table, and an assembler directive that fills a section
TABLE_CPP = 'extern "C" const char table[24 << 20] = {1};\nextern "C" int answer() { return table[7]; }'
FILL_CPP = ('asm(".section .data\\n.globl blob\\nblob: .fill 25165824,1,7\\n.text");\n'
            'extern "C" int answer() { return 42; }')


def _request(source: str) -> dict:
    return {"kind": "inline", "arguments": {"name": "answer", "cpp_sources": source, "no_implicit_headers": True,
                                            "is_python_module": False}}


@pytest.fixture(autouse=True)
def _no_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWRIGHT_PCH", "off")


@pytest.mark.parametrize("source", [TABLE_CPP, FILL_CPP], ids=["initialised-table", "assembler-fill"])
def test_a_build_that_writes_more_than_its_cap_is_refused_and_leaves_nothing(tmp_path: Path, source: str) -> None:
    service = BuildService(tmp_path, "native", LIMITS, output_mb=16)
    reply = service(_request(source))
    assert not reply["ok"] and "16 MB one build may write" in reply["error"], reply
    assert folder_mb(tmp_path) < 1  # no entry, no work folder
    honest = service(_request(PLAIN_CPP))  # the honest build beside it stays served
    assert honest["ok"], honest


def _entry(root: Path, name: str, mb: int, age_s: float) -> Path:
    entry = root / (name * 64)[:64]
    entry.mkdir(parents=True)
    (entry / "binary.so").write_bytes(b"\0" * (mb << 20))
    past = time.time() - age_s
    os.utime(entry, (past, past))
    return entry


def test_the_cache_evicts_the_entries_used_longest_ago_never_the_running_evaluations(tmp_path: Path) -> None:
    oldest, older, kept, recent = (_entry(tmp_path, "a", 3, 9000), _entry(tmp_path, "b", 3, 8000),
                                   _entry(tmp_path, "c", 3, 10000), _entry(tmp_path, "d", 3, GRACE_S / 2))
    (tmp_path / "pch").mkdir()  # not an entry: the headers have their own bound
    removed = evict(tmp_path, 4, keep={kept.name})
    assert removed == [oldest.name, older.name]  # oldest first; the running one and a recent one stay
    assert kept.is_dir() and recent.is_dir() and (tmp_path / "pch").is_dir()
    assert evict(tmp_path, 100, keep=set()) == []


def test_a_new_build_evicts_another_evaluations_old_entry_and_keeps_its_own(tmp_path: Path) -> None:
    first = BuildService(tmp_path, "native", LIMITS)
    built = first(_request(PLAIN_CPP))
    assert built["ok"]
    past = time.time() - 2 * GRACE_S
    os.utime(built["folder"], (past, past))
    second = BuildService(tmp_path, "native", LIMITS, cache_mb=0)  # another evaluation, a cache with no room
    own = second(_request(PLAIN_CPP.replace("42", "43")))
    assert own["ok"] and Path(own["folder"]).is_dir()
    assert not Path(built["folder"]).exists() and second.records[-1]["evicted"] == [Path(built["folder"]).name]
