"""Profile an accepted CUDA candidate with Nsight Compute in a separate isolated child (GPU only).
Missing ncu, missing counter permissions or a failed profile become a recorded reason; nothing raises."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.child import job as J
from harness.child.child_run import limits_for, run_in_child
from harness.feedback.ncu import diagnose_failure, ncu_command, parse_ncu_csv
from harness.isolation.timing_slot import timing_slot
from harness.policy import EvalPolicy
from harness.records import Evaluation
from kernelbench.problem import Problem


def profile_candidate(problem: Problem, source: str, kernel_names: list[str], policy: EvalPolicy) -> dict[str, Any]:
    """{"ncu": [per-launch records]} or {"error": why not}."""
    command = ncu_command(kernel_names, "ncu.csv")
    if command is None:
        return {"error": "ncu (Nsight Compute) is not on PATH"}
    with timing_slot("cuda"):  # ncu replays kernels on the device: never while another candidate is timed
        run = run_in_child(problem, source, "profile", "cuda", policy, prefix=command,
                           limits=limits_for("cuda", policy, timeout_scale=3), collect=_read_outputs)
    text, log = run.collected
    records = parse_ncu_csv(text)
    if records:
        return {"ncu": records, "kernels": kernel_names}
    return {"error": diagnose_failure(text + "\n" + log), "returncode": run.outcome.returncode}


def _read_outputs(scratch: Path) -> tuple[str, str]:
    """ncu's CSV and the child's log, read before the scratch folder goes."""
    csv_path, log_path = scratch / "ncu.csv", scratch / J.LOG_FILE
    return (csv_path.read_text(errors="replace") if csv_path.exists() else "",
            log_path.read_text(errors="replace") if log_path.exists() else "")


def kernels_of(evaluation: Evaluation) -> list[str]:
    """The CUDA kernels the candidate's builds compiled (from ptxas's report), for ncu's kernel filter."""
    return [k["kernel"] for b in evaluation.build.get("builds", []) for k in b.get("resources") or []]


def profile_accepted(problem: Problem, source: str, evaluation: Evaluation, policy: EvalPolicy) -> None:
    """Store Nsight Compute metrics of an accepted CUDA candidate in `evaluation.metrics` (a reason why not
    otherwise: `eval --profile` on another device, or a kernel that was not accepted)."""
    if evaluation.device != "cuda":
        evaluation.metrics = {"error": "profiling needs the cuda device (Nsight Compute)"}
    elif not evaluation.accepted:
        evaluation.metrics = {"error": f"not profiled: the candidate was {evaluation.verdict.value}"}
    else:
        evaluation.metrics = profile_candidate(problem, source, kernels_of(evaluation), policy)
