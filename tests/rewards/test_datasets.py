"""Dataset builders on fixed rows (pure), then a real export from a scripted run, loaded with `datasets`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rewards.datasets import (dataset_card, dedupe, pair_records, preference_records, rationale, rl_records,
                              sft_records)


def _row(candidate_id: int, verdict: str, speedup: float | None, source: str, judge: str | None = None,
         reply: str = "prose ```python\ncode\n```", problem: str = "fp1", version: str = "checks-a",
         evaluation_id: int | None = None) -> dict:
    interval = [speedup * 0.9, speedup * 1.1] if speedup else None
    return {"run_id": "r", "candidate_id": candidate_id, "round": 0, "problem": "P", "problem_key": "level1/1_P",
            "problem_fingerprint": problem, "source": source, "source_hash": source, "device": "cpu",
            "device_info": {}, "verdict": verdict, "speedup": speedup, "reasons": [],
            "prompt": [{"role": "user", "content": "write it"}], "reply": reply, "judge_advice": judge,
            "speedup_ci": interval, "speedup_significant": bool(interval) and not interval[0] <= 1 <= interval[1],
            "judge": {"checks_version": version, "protocol": "parent-driven", "device": "cpu",
                      "static_policy": "default", "evaluation_id": evaluation_id or candidate_id}}


ROWS = [
    _row(1, "accepted", 1.0, "slow"),
    _row(2, "accepted", 3.0, "fast-verbose", judge="a very long rationale " * 20),
    _row(3, "accepted", 2.99, "fast-terse", judge="short"),
    _row(4, "incorrect", None, "wrong"),
    _row(5, "accepted", 50.0, "other-problem", problem="fp2"),
]


def test_sft_keeps_per_problem_the_shortest_rationale_at_the_top_speedup() -> None:
    records = {r["problem_fingerprint"]: r for r in sft_records(ROWS)}
    assert records["fp1"]["completion"] == "fast-terse" and records["fp1"]["rationale"].startswith("short")
    assert records["fp2"]["completion"] == "other-problem"
    assert all(r["verdict"] == "accepted" for r in records.values())
    assert sft_records(ROWS, min_speedup=10.0)[0]["problem_fingerprint"] == "fp2"


def test_rl_rewards_are_zero_unless_accepted() -> None:
    records = {r["candidate_id"]: r for r in rl_records(ROWS)}
    assert records[4]["reward"] == 0.0 and records[4]["verdict"] == "incorrect"
    assert records[2]["reward"] > records[1]["reward"] > 0
    assert {r["reward_definition"] for r in records.values()} == {"interval"}
    assert records[1]["reward"] <= 1.0  # parity, interval 0.9-1.1: no more than parity
    point = {r["candidate_id"]: r for r in rl_records(ROWS, reward_definition="point")}
    assert point[2]["reward"] > records[2]["reward"] and point[2]["reward_definition"] == "point"


def test_every_record_names_the_harness_that_judged_it() -> None:
    for builder in (sft_records, rl_records, preference_records, pair_records):
        records = builder(ROWS)
        assert records and all(r["checks_version"] == "checks-a" and r["judge"]["protocol"] == "parent-driven"
                               for r in records), builder.__name__


def test_dedupe_keeps_the_most_recently_judged_row_of_a_kernel() -> None:
    """The same kernel in two runs, re-judged (rejected) in the second: only the new verdict is exported."""
    old = {**_row(1, "accepted", 3.0, "same", evaluation_id=1), "run_id": "a"}
    new = {**_row(2, "rejected", None, "same", evaluation_id=7, version="checks-b"), "run_id": "b"}
    other = _row(3, "accepted", 1.0, "other", evaluation_id=3)
    assert dedupe([old, other, new]) == [other, new]
    assert dedupe([new, old]) == [new]
    assert [r["candidate_id"] for r in rl_records(dedupe([old, new]))] == [2]


def test_pairs_are_accepted_kernels_of_one_problem_whose_intervals_are_apart() -> None:
    close = _row(6, "accepted", 3.1, "fast-close")  # within 10% of 3.0: no pair with the two fast ones
    pairs = pair_records(ROWS + [close])
    assert {(p["fast"], p["slow"]) for p in pairs} == {("fast-verbose", "slow"), ("fast-terse", "slow"),
                                                       ("fast-close", "slow")}
    assert all(p["fast_speedup_ci"][0] > p["slow_speedup_ci"][1] for p in pairs)
    overlapping = {**_row(7, "accepted", 1.3, "wide"), "speedup_ci": [0.8, 2.0]}
    assert pair_records([ROWS[0], overlapping]) == []  # 1.3x over 1.0x, but the intervals overlap
    assert pair_records(ROWS, min_speedup=4.0) == []


def test_the_card_counts_what_the_export_holds_and_who_judged_it() -> None:
    rows = ROWS + [_row(8, "rejected", None, "exploit", version="checks-b")]
    records = rl_records(rows)
    card = dataset_card("rl", rows, records, duplicates=2, reward_definition="interval")
    assert card["records"] == len(records) == 6 and card["duplicates_dropped"] == 2
    assert card["verdicts"] == {"accepted": 4, "incorrect": 1, "rejected": 1} and card["devices"] == {"cpu": 6}
    assert card["checks_versions"] == {"checks-a": 5, "checks-b": 1} and card["policies"] == {"default": 6}
    assert card["reward_definition"] == "interval" and "lower bound" in card["reward_doc"]
    assert {p["fingerprint"] for p in card["problems"]} == {"fp1", "fp2"}


def test_preference_pairs_never_choose_a_failed_or_barely_faster_kernel() -> None:
    pairs = preference_records(ROWS)
    assert {(p["chosen"], p["rejected"]) for p in pairs} == {
        ("fast-verbose", "slow"), ("fast-terse", "slow"), ("fast-verbose", "wrong"), ("fast-terse", "wrong"),
        ("slow", "wrong")}
    assert all(p["verdict"] == "accepted" and p["problem_fingerprint"] == "fp1" for p in pairs)


def test_preference_pairs_say_whether_both_kernels_answer_the_same_prompt() -> None:
    other_prompt = {**_row(6, "incorrect", None, "wrong-elsewhere"), "prompt": [{"role": "user", "content": "fix it"}]}
    pairs = preference_records([ROWS[0], ROWS[3], other_prompt])
    assert [(p["rejected"], p["shared_prompt"]) for p in pairs] == [("wrong", True), ("wrong-elsewhere", False)]
    assert pairs[1]["prompt"] == ROWS[0]["prompt"] and pairs[1]["rejected_prompt"] == other_prompt["prompt"]


def test_rationale_drops_code() -> None:
    assert rationale(_row(1, "accepted", 1.0, "s", judge="J", reply="why ```python\nx\n``` end")) == "J\n\nwhy  end"


@pytest.mark.slow
def test_export_from_a_scripted_run_loads_with_datasets(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    from agent.config import OptimizeConfig
    from harness.policy import EvalPolicy
    from agent.run_spec import ModelSpec
    from kernelwright.optimize_service import run_optimize
    from tests.agent.scripts import relu_repair_script

    db = f"sqlite:///{tmp_path / 'export.db'}"
    run_optimize("relu", OptimizeConfig(device="cpu", rounds=2, policy=EvalPolicy(timing_budget_s=0.1)),
                 ModelSpec(model=f"scripted:{relu_repair_script(tmp_path)}"), db)
    kernelwright = str(Path(sys.executable).parent / "kernelwright")
    for kind in ("sft", "rl", "preference"):
        out = tmp_path / f"{kind}.jsonl"
        done = subprocess.run([kernelwright, "export", str(out), "--format", kind, "--db", db,
                               "--min-speedup", "0"],  # the CPU ReLU may be no faster: keep it as a target here
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        loaded = datasets.load_dataset("json", data_files=str(out), split="train")
        assert len(loaded) >= 1 and {"problem_fingerprint", "device", "verdict"} <= set(loaded.column_names)
        if kind == "rl":
            assert sorted(loaded["verdict"]) == ["accepted", "incorrect"]
            assert [r for v, r in zip(loaded["verdict"], loaded["reward"]) if v == "incorrect"] == [0.0]


def test_a_kernel_not_significantly_faster_is_no_target_from_min_speedup_one() -> None:
    slower = _row(6, "accepted", 0.24, "slower", problem="fp3")
    tie = {**_row(7, "accepted", 1.16, "tie", problem="fp4"), "speedup_ci": [0.95, 1.4], "speedup_significant": False}
    rows = [*ROWS, slower, tie]
    assert {r["problem_fingerprint"] for r in sft_records(rows, min_speedup=1.0)} == {"fp1", "fp2"}
    assert {r["problem_fingerprint"] for r in sft_records(rows)} == {"fp1", "fp2", "fp3", "fp4"}  # 0 keeps all
    chosen = {r["chosen"] for r in preference_records(rows, min_speedup=1.0)}
    assert "slow" not in chosen and "tie" not in chosen and "fast-terse" in chosen


def test_preference_never_prefers_one_accepted_kernel_to_another_on_noise() -> None:
    noisy = {**_row(9, "accepted", 1.5, "noisy-fast"), "speedup_ci": [0.9, 2.2]}
    assert preference_records([ROWS[0], noisy]) == []  # 1.5x over 1.0x, but the intervals overlap
    assert [(p["chosen"], p["rejected"]) for p in preference_records([ROWS[0], ROWS[2]])] == [("fast-terse", "slow")]
