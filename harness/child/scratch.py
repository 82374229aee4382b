"""An evaluation's scratch folder: what the parent hands the child (job, candidate, problem, inputs) and reads
back (result), removed afterwards unless KERNELWRIGHT_KEEP_SCRATCH=1."""

from __future__ import annotations

import os
import secrets
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from harness.child import job as J
from harness.paths import scratch_root
from harness.records import Check, Finding
from harness.verification.reference import ReferenceRun
from harness.isolation.scratch_quota import (capacity, grow, is_quota, mount_quota, release, release_abandoned,
                                             used)
from kernelbench.problem import Problem


_HARNESS_FILES = 16 << 20  # room for the job, the problem, the candidate, the result and the event log


@contextmanager
def scratch_folder(problem: Problem, source: str, job: J.ChildJob) -> Iterator[Path]:
    """A fresh folder, where this machine allows it a tmpfs of `scratch_limit_mb` (plus room for the harness's
    own files) so the kernel stops a candidate that writes more (harness/isolation/scratch_quota.py)."""
    root = Path(os.path.realpath(scratch_root()))
    root.mkdir(parents=True, exist_ok=True)
    release_abandoned(root)
    scratch = root / f"eval-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{secrets.token_hex(4)}"
    scratch.mkdir()
    mount_quota(scratch, (job.policy.scratch_limit_mb << 20) + _HARNESS_FILES)
    (scratch / J.CANDIDATE_FILE).write_text(source)
    (scratch / J.PROBLEM_FILE).write_text(problem.source)
    (scratch / J.JOB_FILE).write_text(job.model_dump_json())
    try:
        yield scratch
    finally:
        if os.environ.get("KERNELWRIGHT_KEEP_SCRATCH") != "1":
            release(scratch)


def scratch_full(scratch: Path, job: J.ChildJob) -> Finding | None:
    """The reason when the candidate filled its scratch quota (the kernel refused its writes), else None."""
    if not is_quota(scratch) or capacity(scratch) - used(scratch) > (1 << 20):
        return None
    return Finding(Check.SCRATCH_LIMIT, f"the candidate filled its scratch folder: it may write "
                   f"{job.policy.scratch_limit_mb} MB there (scratch_limit_mb, a tmpfs the kernel enforces) and its "
                   "writes beyond were refused")


def save_inputs(scratch: Path, reference: ReferenceRun, parent_calls: bool = False) -> None:
    """What the child loads: the init inputs and, where it runs the calls itself, the trials' and knock-out's inputs.
    Where the parent makes every call through the child's input slots (`parent_calls`), no call's inputs are in the
    file, only their shapes and dtypes (meta tensors): a candidate that reads its own folder when imported learns
    nothing it could answer a trial from."""
    import torch

    from harness.values.integrity import flatten
    from harness.values.tensors import nbytes

    output = nbytes(flatten(reference.outputs[0]))  # the knock-out call's, which the child saves
    if parent_calls:
        payload = {"init_inputs": reference.init_inputs,
                   "template": [torch.empty(v.shape, dtype=v.dtype, device="meta") if isinstance(v, torch.Tensor)
                                else v for v in reference.trial_inputs[0]]}
        room = output
    else:  # the inputs, and every trial's outputs the child saves
        payload = {"init_inputs": reference.init_inputs, "knockout": reference.knockout_inputs,
                   "trials": [{"seed": s, "inputs": i} for s, i in zip(reference.trial_seeds, reference.trial_inputs)]}
        room = 2 * (nbytes(reference.trial_inputs[0]) + output) * len(reference.trial_inputs) + output + \
            nbytes(reference.knockout_inputs or [])
    if reference.parameters:  # structured state redrawn: both sides' children set it after construction
        payload["parameters"] = reference.parameters
        room += nbytes([t for drawn in reference.parameters.values() for t in drawn.values()])
    if is_quota(scratch):  # beside the candidate's allowance
        grow(scratch, room + nbytes(reference.init_inputs) + (16 << 20))
    torch.save(payload, scratch / J.INPUTS_FILE)


def read_result(scratch: Path) -> J.ChildResult | None:
    try:
        return J.ChildResult.model_validate_json((scratch / J.RESULT_FILE).read_text())
    except (OSError, ValueError):  # missing (the child died) or malformed: never trusted
        return None
