"""Profile an accepted CUDA candidate with Nsight Compute in a separate isolated child (GPU only).
Missing ncu, missing counter permissions or a failed profile become a recorded reason; nothing raises."""

from __future__ import annotations

import secrets
from typing import Any

from harness import job as J
from harness.evaluate import build_service
from harness.ncu import diagnose_failure, ncu_command, parse_ncu_csv
from harness.policy import EvalPolicy
from harness.reference import run_reference
from harness.sandbox import Limits
from harness.session import run_child
from harness.scratch import save_inputs, scratch_folder
from harness.timing_slot import timing_slot
from kernelbench.problem import Problem


def profile_candidate(problem: Problem, source: str, kernel_names: list[str], policy: EvalPolicy) -> dict[str, Any]:
    """{"ncu": [per-launch records]} or {"error": why not}."""
    command = ncu_command(kernel_names, "ncu.csv")
    if command is None:
        return {"error": "ncu (Nsight Compute) is not on PATH"}
    job = J.ChildJob(device="cuda", init_seed=secrets.randbits(31), cpu_threads=policy.cpu_threads, hardening=False)
    with scratch_folder(problem, source, job) as scratch:
        save_inputs(scratch, run_reference(problem, "cuda", job.init_seed, [secrets.randbits(31)],
                                            vary_distributions=False))
        limits = Limits(timeout_s=policy.timeout_s * 3, memory_mb=policy.memory_limit_mb, address_space_limit=False)
        with timing_slot("cuda"):  # ncu replays kernels on the device: never while another candidate is timed
            outcome = run_child(scratch, limits, prefix=command, on_build=build_service("cuda", policy),
                                role="profile")
        csv_path = scratch / "ncu.csv"
        text = csv_path.read_text(errors="replace") if csv_path.exists() else ""
        records = parse_ncu_csv(text)
        if records:
            return {"ncu": records, "kernels": kernel_names}
        log = (scratch / J.LOG_FILE).read_text(errors="replace") if (scratch / J.LOG_FILE).exists() else ""
        return {"error": diagnose_failure(text + "\n" + log), "returncode": outcome.returncode}
