"""An evaluation's scratch folder: what the parent hands the child (job, candidate, problem, inputs) and reads
back (result), removed afterwards unless KERNELWRIGHT_KEEP_SCRATCH=1."""

from __future__ import annotations

import os
import secrets
import shutil
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from harness import job as J
from harness.paths import scratch_root
from harness.reference import ReferenceRun
from kernelbench.problem import Problem


@contextmanager
def scratch_folder(problem: Problem, source: str, job: J.ChildJob) -> Iterator[Path]:
    root = scratch_root()
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(os.path.realpath(root)) / f"eval-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"
    scratch.mkdir()
    (scratch / J.CANDIDATE_FILE).write_text(source)
    (scratch / J.PROBLEM_FILE).write_text(problem.source)
    (scratch / J.JOB_FILE).write_text(job.model_dump_json())
    try:
        yield scratch
    finally:
        if os.environ.get("KERNELWRIGHT_KEEP_SCRATCH") != "1":
            shutil.rmtree(scratch, ignore_errors=True)


def save_inputs(scratch: Path, reference: ReferenceRun) -> None:
    import torch

    torch.save({"init_inputs": reference.init_inputs,
                "trials": [{"seed": s, "inputs": i} for s, i in zip(reference.trial_seeds, reference.trial_inputs)]},
               scratch / J.INPUTS_FILE)


def read_result(scratch: Path) -> J.ChildResult | None:
    try:
        return J.ChildResult.model_validate_json((scratch / J.RESULT_FILE).read_text())
    except (OSError, ValueError):  # missing (the child died) or malformed: never trusted
        return None
