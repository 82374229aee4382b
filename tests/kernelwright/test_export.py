"""`kernelwright export` from a store (no kernels run): every format loads with `datasets`, every row names the harness
that judged it, a re-judged kernel is exported with its newest verdict only, and a card describes the export."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from harness.records import Verdict
from kernelbench.bundled import find_bundled
from kernelwright.cli import app
from store import open_store, record_evaluation
from store.results import add_evaluation
from store.runs import create_run, record_llm_call
from tests.store.test_store import _evaluation

KERNELS = [("slow", 1.0, (0.95, 1.05)), ("noisy", 1.32, (0.78, 1.97)), ("fast", 3.0, (2.6, 3.4)),
           ("exploit", 9.0, (8.5, 9.5))]


def _store(tmp_path: Path) -> tuple[str, dict[str, int]]:
    url = f"sqlite:///{tmp_path / 'kw.db'}"
    sessions = open_store(url)
    run_id = create_run(sessions, "optimize", "scripted", {})
    problem = find_bundled("relu")
    evaluations = {}
    for slot, (name, speedup, interval) in enumerate(KERNELS + [("wrong", None, None)]):
        evaluation = _evaluation(Verdict.ACCEPTED if speedup else Verdict.INCORRECT, candidate_hash=name)
        evaluation.speedup, evaluation.speedup_ci = speedup, interval
        evaluation.speedup_significant = bool(interval) and not interval[0] <= 1 <= interval[1]
        evaluation.checks_version = "checks-old000000000"
        reply = SimpleNamespace(content=f"```python\n{name}\n```", usage=None, cost_usd=0.0, latency_s=0.0)
        record_llm_call(sessions, run_id, problem, 0, "coder", slot, "scripted",
                        [{"role": "user", "content": "write it"}], reply)
        evaluations[name] = record_evaluation(sessions, problem, name, evaluation, run_id=run_id, round=0, slot=slot)
    return url, evaluations


def _rejudge(url: str, evaluation_id: int) -> int:
    """What `rescore` stores for the exploit: a new, rejected evaluation linked to the accepted one."""
    sessions = open_store(url)
    rejected = _evaluation(Verdict.REJECTED, candidate_hash="exploit")
    rejected.speedup = rejected.speedup_ci = None
    rejected.checks_version = "checks-new000000000"
    with sessions() as session:
        from store.models import EvaluationRow
        candidate_id = session.get(EvaluationRow, evaluation_id).candidate_id
    return add_evaluation(sessions, candidate_id, rejected, rescore_of=evaluation_id)


@pytest.mark.parametrize("kind", ["rl", "sft", "preference", "pairs"])
def test_every_format_loads_with_datasets_and_names_its_judge(tmp_path: Path, kind: str) -> None:
    datasets = pytest.importorskip("datasets")
    url, evaluations = _store(tmp_path)
    new_id = _rejudge(url, evaluations["exploit"])
    out = tmp_path / f"{kind}.jsonl"
    result = CliRunner().invoke(app, ["export", str(out), "--format", kind, "--db", url])
    assert result.exit_code == 0, result.output
    loaded = datasets.load_dataset("json", data_files=str(out), split="train", cache_dir=str(tmp_path / "hf"))
    assert len(loaded) >= 1
    assert {"problem_fingerprint", "device", "verdict", "checks_version", "judge"} <= set(loaded.column_names)
    assert all(judge["checks_version"].startswith("checks-") and judge["device"] == "cpu"
               for judge in loaded["judge"])
    card = json.loads((tmp_path / f"{kind}.jsonl.card.json").read_text())
    assert card["format"] == kind and card["records"] == len(loaded)
    assert card["verdicts"] == {"accepted": 3, "incorrect": 1, "rejected": 1}  # the exploit's newest verdict
    assert card["checks_versions"] == {"checks-new000000000": 1, "checks-old000000000": 4}
    assert [p["fingerprint"] for p in card["problems"]] == [find_bundled("relu").fingerprint]
    if kind == "rl":
        rewards = dict(zip(loaded["completion"], loaded["reward"]))
        assert rewards["```python\nexploit\n```"] == 0.0  # rejected on re-judging: it earns nothing now
        assert rewards["```python\nnoisy\n```"] <= 1.0  # not significant: no more than parity
        assert rewards["```python\nfast\n```"] == pytest.approx(1 + 1.3785, abs=1e-3)  # log2(2.6): its lower bound
        assert card["reward_definition"] == "interval"
        exploit = next(j for j in loaded["judge"] if j["evaluation_id"] == new_id)
        assert exploit["rescore_of"] == evaluations["exploit"]
    if kind == "pairs":
        assert ("fast", "slow") in set(zip(loaded["fast"], loaded["slow"]))
        assert "exploit" not in list(loaded["fast"]) + list(loaded["slow"])


def test_the_point_reward_is_available_by_name_and_an_unknown_one_is_refused(tmp_path: Path) -> None:
    url, _ = _store(tmp_path)
    out = tmp_path / "rl.jsonl"
    assert CliRunner().invoke(app, ["export", str(out), "--reward", "point", "--db", url]).exit_code == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["reward_definition"] for r in rows} == {"point"}
    assert max(r["reward"] for r in rows if "noisy" in r["completion"]) == pytest.approx(1.40, abs=0.01)
    result = CliRunner().invoke(app, ["export", str(out), "--reward", "optimistic", "--db", url])
    assert result.exit_code == 2 and "interval, point" in result.output and "Traceback" not in result.output
