"""The sweep's queries (store/sweep_queries.py) on a fresh SQLite store: items made on first use and updated,
problems read back in the order asked, baselines per device key, timings and shrink notes by id."""

from __future__ import annotations

from pathlib import Path

from harness.records import Verdict
from kernelbench.bundled import find_bundled
from store import open_store, record_evaluation
from store import sweep_queries as queries
from store.runs import create_run
from tests.store.test_store import _evaluation


def test_items_problems_baselines_timings(tmp_path: Path) -> None:
    sessions = open_store(f"sqlite:///{tmp_path / 's.db'}")
    relu, gelu = find_bundled("relu"), find_bundled("gelu")
    run_id = create_run(sessions, "sweep", None, {})
    queries.mark_item(sessions, run_id, relu, status="running")
    queries.mark_item(sessions, run_id, relu, status="done", verdict=Verdict.ACCEPTED.value, speedup=1.2)
    items = queries.sweep_items(sessions, run_id)
    assert list(items) == [relu.key] and items[relu.key].status == "done" and items[relu.key].speedup == 1.2

    queries.add_problems(sessions, [gelu])
    found = queries.stored_problems(sessions, [gelu.fingerprint, "unknown", relu.fingerprint])
    assert [p.key for p in found] == [gelu.key, relu.key] and found[0].source == gelu.source

    assert queries.baseline(sessions, relu.fingerprint, "cpu-1") is None
    queries.add_baseline(sessions, relu.fingerprint, "cpu-1", {"eager_ms": 1.0, "compile_error": "no compiler"})
    row = queries.baseline(sessions, relu.fingerprint, "cpu-1")
    assert row is not None and row.eager_ms == 1.0 and row.compile_ms is None and row.errors == {"compile_error":
                                                                                                  "no compiler"}
    by_key = queries.baselines(sessions, {relu.key: relu.fingerprint, gelu.key: gelu.fingerprint}, "cpu-1")
    assert list(by_key) == [relu.key]

    evaluation_id = record_evaluation(sessions, relu, "source", _evaluation())
    timing = queries.timings(sessions, [evaluation_id])[evaluation_id]
    assert timing["ref_ms"] == 3.0 and timing["speedup_ci"] == [1.4, 1.6]
    assert queries.shrink_notes(sessions, [items[relu.key].problem_ref]) == {items[relu.key].problem_ref: None}


def test_a_baseline_timed_on_the_childs_own_clock_is_never_reused_and_is_replaced(tmp_path: Path) -> None:
    """Rows an earlier release timed in one child on its own clock (method NULL after revision 0002) read as no
    baseline, so the sweep measures the problem again; the new row, with its interval, replaces the old one."""
    from store.models import BaselineRow

    sessions = open_store(f"sqlite:///{tmp_path / 's.db'}")
    relu = find_bundled("relu")
    with sessions.begin() as session:
        session.add(BaselineRow(problem_fingerprint=relu.fingerprint, device_key="cpu-1", eager_ms=0.023,
                                compile_ms=0.036, errors={}))
    assert queries.baseline(sessions, relu.fingerprint, "cpu-1") is None
    assert queries.baselines(sessions, {relu.key: relu.fingerprint}, "cpu-1") == {}
    queries.add_baseline(sessions, relu.fingerprint, "cpu-1", {
        "eager_ms": 0.11, "compile_ms": 0.16, "compile_speedup": 0.69, "compile_speedup_ci": (0.58, 0.8),
        "timing": {"protocol": "parent-driven", "process_sets": 3}})
    row = queries.baseline(sessions, relu.fingerprint, "cpu-1")
    assert row is not None and row.method == queries.BASELINE_METHOD and row.eager_ms == 0.11
    assert row.compile_speedup_ci == [0.58, 0.8] and row.timing == {"protocol": "parent-driven", "process_sets": 3}
    with sessions() as session:
        assert session.query(BaselineRow).count() == 1
