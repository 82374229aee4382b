"""The child's checking commands: `correctness` (the trials run in the child, CUDA), `knockout` (one call with
every kernel function poisoned) and `census` (one call under the compute census). Where the parent makes the
calls (the CPU), it wrote the knock-out's and the census's inputs into an input slot first."""

from __future__ import annotations

from typing import Any

from harness.child import job as J
from harness.child.calls import call, sync
from harness.child.process import CandidateFailure, note_replacements, short_traceback
from harness.child.timing import warm_device_timing
from harness.isolation import protocol as P
from harness.values.integrity import (flatten, inputs_changed, output_problems, returned_fingerprint, shares_memory,
                                      still_changing, thread_state)
from harness.values.precision import precision_settings
from harness.values.tensors import cloned, portable, to_device


def _check_call(job: J.ChildJob, model: Any, result: Any, pristine: list[Any], used: list[Any],
                earlier: list[Any], integrity: list[str]) -> None:
    changed = inputs_changed(pristine, used)
    if changed:
        integrity.append(f"mutation: forward() modified input(s) {changed} in place")
    integrity.extend(output_problems(result, job.device, used, model, earlier))
    earlier.extend(t for t in flatten(result) if t is not None)


def run_correctness(job: J.ChildJob, model: Any, trials: list[dict[str, Any]],
                    integrity: list[str]) -> list[list[Any]]:
    """Per trial: the candidate's output on fresh copies of the inputs, made the way every call is made (no
    switch differs from the timed calls, and the reference never runs in this process: its freed memory cannot
    hand the candidate a correct answer). Outputs are copied when they are read, so a candidate that reuses its
    output buffer is reported for that ([aliasing]) and for nothing else."""
    outputs: list[list[Any]] = []
    earlier: list[Any] = []  # kept alive so a later output cannot legitimately land in the same memory
    returned: list[tuple[Any, list[float]]] = []  # each output with its checksums when its call returned
    for index, trial in enumerate(trials):
        pristine = to_device(cloned(trial["inputs"]), job.device)
        inputs = to_device(cloned(trial["inputs"]), job.device)
        try:
            result = call(model, inputs)
            sync(job.device)
        except BaseException as exc:
            raise CandidateFailure("runtime_error", f"ModelNew.forward raised on trial {index + 1}:\n"
                                   + short_traceback(exc)) from None
        if job.hardening:
            returned.append((result, returned_fingerprint(result, job.device)))
            _check_call(job, model, result, pristine, inputs, earlier, integrity)
        outputs.append([portable(result, copy=True)])
    watched = [(output, sums) for k, (output, sums) in enumerate(returned)
               if not any(shares_memory(output, later) for later, _ in returned[k + 1:])]  # overwritten: [aliasing]
    if watched and still_changing(watched, job.device):
        integrity.append("work-after-return: the output kept changing after forward() returned (work on another "
                         "thread or stream finished later)")
    return outputs


class Checking:
    """`correctness`, `knockout`, `census` (handlers of harness/child/main.py's Child)."""

    def do_correctness(self, command: P.Correctness) -> P.Status:
        import torch

        self.events.write(phase="correctness")
        before = self.switch.calls
        outputs = run_correctness(self.job, self.model, self.payload["trials"], self.integrity)
        self.kernel_calls["correctness"] = self.switch.calls - before
        warm_device_timing(self.job.device)
        self.threads["after_correctness"] = thread_state()
        self.settings["after_correctness"] = precision_settings()
        note_replacements(self.identities, self.integrity, "the correctness calls")
        torch.save(outputs, self.scratch / J.OUTPUTS_FILE)
        return P.Status()

    def do_knockout(self, command: P.Knockout) -> P.KnockedOut:
        """One call on inputs no other call used (trial 0's shapes, other values) with every kernel function poisoned:
        its output must be wrong. Where the parent makes the calls, it wrote those inputs into input slot `slot`."""
        import torch

        if not self.switch.wrapped:
            return P.KnockedOut(checked=False)
        if command.slot is not None:
            inputs = self.slots[command.slot]
        else:
            knockout = self.payload.get("knockout") or self.payload["trials"][0]["inputs"]
            inputs = to_device(cloned(knockout), self.job.device)
        self.switch.poison = True
        try:
            output = call(self.model, inputs)
            sync(self.job.device)
        except Exception:  # poisoned values made it raise: it depends on its kernel
            output = None
        finally:
            self.switch.poison = False
        torch.save(portable(output) if output is not None else None, self.scratch / J.KNOCKOUT_FILE)
        return P.KnockedOut(checked=True)

    def do_census(self, command: P.Census) -> P.CensusFound:
        """One call on trial 0's inputs (in input slot `slot` where the parent makes the calls) under the compute
        census (harness/child/census.py): which PyTorch operators forward ran outside the candidate's kernels."""
        from harness.child.census import census

        inputs = self.slots[command.slot] if command.slot is not None else \
            to_device(cloned(self.payload["trials"][0]["inputs"]), self.job.device)
        self.switch.clocked, self.switch.own_s = True, 0.0
        try:
            _, found = census(lambda: call(self.model, inputs), lambda: self.switch.depth, self.job.device == "cpu")
        finally:
            self.switch.clocked = False
        return P.CensusFound({**found, "own_s": self.switch.own_s})
