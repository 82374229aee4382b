"""The installed `kernelwright` command, run as a user would (a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from store import EvaluationRow, open_store
from tests.conftest import HUGE_ELEMENTWISE, RELU_CANDIDATE

KERNELWRIGHT = str(Path(sys.executable).parent / "kernelwright")


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KERNELWRIGHT, *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


@pytest.mark.slow
def test_eval_json_contract_and_exit_codes(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    accepted = _run("eval", "relu", str(RELU_CANDIDATE), "--device", "cpu", "--json", "--db", db)
    assert accepted.returncode == 0, accepted.stderr
    data = json.loads(accepted.stdout)
    assert data["verdict"] == "accepted"
    assert [r for r in data["reasons"] if not r.startswith("[noise]")] == []  # a loaded machine may say so
    assert data["speedup"] > 0 and data["ref_ms"] > 0 and data["candidate_ms"] > 0
    variants = data["envelope"]["variants"]  # correct at the sizes around the problem's own too
    assert variants and all(v["verdict"] == "accepted" for v in variants), variants
    assert any(v["sizes"]["dim"] % 8 for v in variants)
    not_accepted = _run("eval", "gelu", str(RELU_CANDIDATE), "--device", "cpu", "--json", "--db", db)
    assert not_accepted.returncode == 1
    data = json.loads(not_accepted.stdout)
    assert data["verdict"] == "incorrect" and data["speedup"] is None and data["ref_ms"] is None
    with open_store(db)() as session:
        assert session.scalar(select(func.count()).select_from(EvaluationRow)) == 2


@pytest.mark.slow
def test_eval_table_and_db_from_environment(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'env.db'}"
    # the envelope's table and JSON are the subject of test_eval_json_contract_and_exit_codes
    result = _run("eval", "relu", str(RELU_CANDIDATE), "--device", "cpu", "--no-envelope",
                  env={"KERNELWRIGHT_DB": db})
    assert result.returncode == 0 and "accepted" in result.stdout and "speedup" in result.stdout
    with open_store(db)() as session:
        assert session.scalar(select(func.count()).select_from(EvaluationRow)) == 1


def test_candidate_without_model_new_is_a_verdict_not_a_traceback(tmp_path: Path) -> None:
    empty = tmp_path / "empty.py"
    empty.write_text("import torch\n")
    result = _run("eval", "relu", str(empty), "--device", "cpu", "--json", "--no-store")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert json.loads(result.stdout)["verdict"] == "rejected"


@pytest.mark.parametrize("args, message", [
    (("eval", "relu", "missing.py"), "no such candidate file"),
    (("eval", "no_such_problem", str(RELU_CANDIDATE)), "neither a problem file nor a bundled problem"),
    (("eval", "relu", str(RELU_CANDIDATE), "--device", "tpu"), "choose one of"),
    (("eval", "relu", str(RELU_CANDIDATE), "--db", "not a url"), "not a database URL"),
    (("eval", "relu", str(RELU_CANDIDATE), "--shapes", "dim=many"), "is not name=positive integer"),
    (("eval", "relu", str(RELU_CANDIDATE), "--precision", "fp8"), "choose one of fp32, fp16, bf16"),
    (("sweep", "--problem", "ReLU", "--model", "my-model", "--prices", "/no/such/prices.json"), "No such file"),
    (("eval", "relu", str(RELU_CANDIDATE), "--shapes", "width=7", "--no-store"), "not among its size constants"),
    (("problems", "list", "/no/such/folder"), "no such file or folder"),
])
def test_usage_errors_exit_2_with_a_message(args: tuple[str, ...], message: str) -> None:
    result = _run(*args)
    assert result.returncode == 2
    assert message in " ".join(result.stderr.split()) and "Traceback" not in result.stderr


def test_problems_list_json_lists_the_bundled_set() -> None:
    result = _run("problems", "list", "--json")
    keys = [p["key"] for p in json.loads(result.stdout)]
    assert result.returncode == 0 and "level1/1_ReLU" in keys and "level3/1_MLP" in keys


def test_problems_shrink_reports_fit_and_reductions(tmp_path: Path) -> None:
    big = tmp_path / "level1" / "19_ReLU.py"
    big.parent.mkdir()
    big.write_text(HUGE_ELEMENTWISE)
    result = _run("problems", "shrink", str(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)
    assert row["status"] == "shrunk" and "dim 393216->" in row["changes"]



@pytest.mark.slow
def test_eval_with_shrink_judges_a_kernelbench_sized_problem(tmp_path: Path) -> None:
    big = tmp_path / "level1" / "19_ReLU.py"
    big.parent.mkdir()
    big.write_text(HUGE_ELEMENTWISE)  # 6 GiB per tensor as written; the CPU budget is 64 MiB
    # the envelope of a shrunk problem is judged by test_shrink_cli's optimize --shrink (five evaluations at 64 MiB)
    result = _run("eval", str(big), str(RELU_CANDIDATE), "--device", "cpu", "--shrink", "--json", "--no-store",
                  "--no-envelope")
    assert result.returncode == 0, result.stderr
    assert "size reduction: " in result.stderr and json.loads(result.stdout)["verdict"] == "accepted"


def test_names_that_are_not_in_the_store_are_errors_not_empty_output(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'empty.db'}"
    open_store(db)  # an empty store (a missing one is its own error)
    for args, message in ((("runs", "best", "nosuch"), "no accepted kernel"),
                          (("export", str(tmp_path / "out.jsonl"), "--run", "nosuch"), "no run 'nosuch'"),
                          (("report", "nosuch"), "no run 'nosuch'")):
        result = _run(*args, "--db", db)
        assert result.returncode == 2, (args, result.stderr)
        assert message in " ".join(result.stderr.split()) and "Traceback" not in result.stderr


def test_short_help_and_version() -> None:
    assert "Usage" in _run("-h").stdout and "Usage" in _run("runs", "-h").stdout
    version = _run("--version")
    assert version.returncode == 0 and version.stdout.startswith("kernelwright ")


def test_check_tags_in_reasons_survive_the_terminal_table() -> None:
    from rich.console import Console

    from harness.records import Evaluation, Verdict
    from kernelbench.bundled import find_bundled
    from kernelwright.render import evaluation_table

    evaluation = Evaluation(verdict=Verdict.REJECTED, reasons=["[timed-check] call 3 returned a wrong result"],
                            problem_name="ReLU", problem_fingerprint="f", candidate_hash="c", device="cpu")
    console = Console(record=True, width=200)
    console.print(evaluation_table(find_bundled("relu"), evaluation))
    assert "[timed-check] call 3" in console.export_text()


def test_a_failed_build_is_not_reported_as_built() -> None:
    from rich.console import Console

    from harness.records import Evaluation, Verdict
    from kernelbench.bundled import find_bundled
    from kernelwright.render import evaluation_table

    evaluation = Evaluation(verdict=Verdict.COMPILE_ERROR, reasons=["[build] error: expected ';'"],
                            problem_name="ReLU", problem_fingerprint="f", candidate_hash="c", device="cpu")
    evaluation.build = {"builds": [{"cache_hit": True, "binary": "/b/ok.so", "seconds": 0.01},
                                   {"cache_hit": False, "seconds": 1.23}]}
    console = Console(record=True, width=200)
    console.print(evaluation_table(find_bundled("relu"), evaluation))
    text = console.export_text()
    assert "cached, failed after 1.2 s" in text and "built in" not in text


@pytest.mark.slow
def test_eval_self_check_prints_what_this_machine_can_resolve(tmp_path: Path) -> None:
    """The problem's own Model against itself: the interval holds 1.0, nothing is stored, and a candidate file
    beside --self-check is a usage error."""
    db = tmp_path / "never.db"
    done = _run("eval", "relu", "--self-check", "--device", "cpu", "--json", "--db", f"sqlite:///{db}")
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(done.stdout)
    low, high = data["speedup_ci"]
    assert low <= 1.0 <= high and data["speedup_significant"] is False
    assert data["self_check"].startswith("self-check: the reference against itself read") and "holds 1.0" in \
        data["self_check"]
    assert data["evaluation_id"] is None and not db.exists()
    both = _run("eval", "relu", str(RELU_CANDIDATE), "--self-check", "--device", "cpu")
    assert both.returncode == 2 and "not both" in both.stderr


@pytest.mark.slow
def test_export_op_writes_a_package_only_for_an_accepted_kernel(tmp_path: Path) -> None:
    """Verified first (its sizes and around them), then written; a kernel the harness does not accept is not."""
    done = _run("export-op", "relu", str(RELU_CANDIDATE), str(tmp_path / "op"), "--device", "cpu", "--no-test",
                "--bucket-samples", "1")
    assert done.returncode == 0, done.stderr
    written = json.loads(next((tmp_path / "op").glob("kw_*/export.json")).read_text())
    assert len(written["envelope"]) > 1  # the problem's own sizes and the variants judged correct
    (bucket,) = written["buckets"]  # none declared: the hull of the sizes verified, sampled at its 4 corners + 1
    assert bucket["origin"] == "inferred" and bucket["ranges"]["batch_size"] == [1, 31] and len(bucket["samples"]) == 5
    assert f"bucket {bucket['bucket']} (inferred): verified; sampled at batch_size=1 dim=" in done.stderr
    assert "kernel at batch_size=31 dim=16384 (inputs 31x16384)" in done.stderr  # every size verified is shown
    refused = _run("export-op", "gelu", str(RELU_CANDIDATE), str(tmp_path / "wrong"), "--device", "cpu")
    assert refused.returncode == 1 and "not exported: incorrect" in refused.stderr, refused.stderr
    assert not (tmp_path / "wrong").exists()
