from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from harness.records import Evaluation, Numerics, OracleError, TimingStats, Verdict
from kernelbench.bundled import find_bundled
from store import CandidateRow, EvaluationRow, ProblemRow, open_store, record_evaluation
from store.db import StoreError
from store.results import load_evaluation


def _evaluation(verdict: Verdict = Verdict.ACCEPTED, candidate_hash: str = "h1") -> Evaluation:
    problem = find_bundled("relu")
    return Evaluation(verdict=verdict, reasons=["why"], problem_name=problem.name,
                      problem_fingerprint=problem.fingerprint, candidate_hash=candidate_hash, device="cpu",
                      device_info={"cpu": "test"}, speedup=1.5, speedup_ci=(1.4, 1.6),
                      ref_timing=TimingStats(samples_ms=[3.0, 3.0], median_ms=3.0, p25_ms=3.0, p75_ms=3.0),
                      candidate_timing=TimingStats(samples_ms=[2.0, 2.0], median_ms=2.0, p25_ms=2.0, p75_ms=2.0))


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    sessions = open_store(f"sqlite:///{tmp_path / 'kw.db'}")
    original = _evaluation()
    evaluation_id = record_evaluation(sessions, find_bundled("relu"), "source", original, origin="c.py")
    assert load_evaluation(sessions, evaluation_id) == original
    with sessions() as session:
        row = session.get(EvaluationRow, evaluation_id)
        assert (row.verdict, row.speedup, row.ref_samples_ms, row.device_info) == ("accepted", 1.5, [3.0, 3.0],
                                                                                  {"cpu": "test"})
        assert row.candidate.problem.fingerprint == find_bundled("relu").fingerprint


def test_the_numerical_contract_is_a_typed_record_stored_as_the_json_it_always_was(tmp_path: Path) -> None:
    """`Evaluation.numerics` is a `Numerics` record: the row holds the same JSON the dict held, and a row written
    before `multiple` existed still loads."""
    sessions = open_store(f"sqlite:///{tmp_path / 'kw.db'}")
    within = OracleError(max_abs=1e-5, relative=1e-6, eps=1.2e-7)
    original = _evaluation().model_copy(update={"numerics": Numerics(candidate=within, reference=within)})
    evaluation_id = record_evaluation(sessions, find_bundled("relu"), "source", original, origin="c.py")
    with sessions() as session:
        row = session.get(EvaluationRow, evaluation_id)
        assert row.record["numerics"] == {"candidate": within.model_dump(), "reference": within.model_dump(),
                                          "skipped": None, "multiple": None}
        row.record = {**row.record, "numerics": {"candidate": None, "reference": None, "skipped": "no float64"}}
        session.commit()
    loaded = load_evaluation(sessions, evaluation_id)
    assert loaded is not None and loaded.numerics == Numerics(skipped="no float64")


def test_same_candidate_twice_is_one_candidate_with_two_evaluations(tmp_path: Path) -> None:
    sessions = open_store(f"sqlite:///{tmp_path / 'kw.db'}")
    problem = find_bundled("relu")
    for verdict in (Verdict.ACCEPTED, Verdict.INCORRECT):
        record_evaluation(sessions, problem, "same source", _evaluation(verdict))
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(CandidateRow)) == 1
        assert session.scalar(select(func.count()).select_from(EvaluationRow)) == 2
        assert session.scalar(select(func.count()).select_from(ProblemRow)) == 1


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    sessions = open_store(f"sqlite:///{tmp_path / 'kw.db'}")
    with sessions() as session:
        assert session.execute(text("PRAGMA journal_mode")).scalar() == "wal"


def _writer(url: str, worker: int) -> None:
    sessions = open_store(url)
    for index in range(10):
        record_evaluation(sessions, find_bundled("relu"), f"source {worker}-{index}",
                          _evaluation(candidate_hash=f"{worker}-{index}"))


def test_concurrent_writers_from_several_processes_lose_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'kw.db'}"
    open_store(url)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(url, w)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    with open_store(url)() as session:
        assert session.scalar(select(func.count()).select_from(EvaluationRow)) == 40
        assert session.scalar(select(func.count()).select_from(ProblemRow)) == 1


def test_bad_url_is_a_clear_error() -> None:
    with pytest.raises(StoreError, match="not a database URL"):
        open_store("not a url")
    with pytest.raises(StoreError, match="cannot open database"):
        open_store("nosuchdialect://x/y")
