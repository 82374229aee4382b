"""The verdict, decided in one place from the facts an evaluation gathered (harness/decision/facts.py).

`GATES` is the order in which the checks decide, cheapest and most fundamental first: derived from the registry
(harness/checks.py), where each check is one row naming its gate. Each gate is a pure function
`(facts, policy) -> findings`: it returns nothing when it has nothing to say or when what it needs was not
gathered, notes (findings without a verdict) that the evaluation carries whatever is decided, or findings with a
verdict: the first gate that returns one decides, and no later gate runs. What a finding decides under each
static-policy level is the row's (`verdict_under`), never an `if` here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from harness.checks import gate_order, verdict_under
from harness.child.census import INSIDE
from harness.child.verdicts import NO_CUDA_SOURCES, child_failure, integrity_failures
from harness.decision.facts import Facts
from harness.decision.timing_reading import checks_note
from harness.defences import is_off
from harness.measurement.frozen_trials import cache_finding
from harness.policy import EvalPolicy
from harness.records import Check, Finding, Verdict
from harness.verification.binary_imports import binary_findings
from harness.verification.oracle import contract_finding, skipped_note
from harness.verification.source_scan import scan_built_sources

Gate = Callable[[Facts, EvalPolicy], Sequence[Finding]]


def _rejects(check: Check, message: str) -> Finding:
    return Finding(check, message, verdict=Verdict.REJECTED)


def _note(check: Check, message: str, lead: bool = False) -> Finding:
    return Finding(check, message, fatal=False, lead=lead)


def static_policy(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    """The source's own checks: what the static policy forbids decides before anything runs."""
    if facts.static_verdict is None:
        return []
    return [Finding(f.check, f.message, f.line, True, facts.static_verdict) for f in facts.static_findings if f.fatal]


def limits(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    """A build or scratch limit the child hit: whatever it made of its refused build or write, this is why."""
    return [replace(facts.limit, verdict=Verdict.REJECTED)] if facts.limit is not None else []


def child_ended(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    """The child crashed, timed out, ran out of memory or reported its own failure."""
    child = facts.child
    if child is None or not (child.stopped or child.failure or child.result is None):
        return []
    return child_failure(child.outcome, child.result, child.events, child.log_tail, policy, child.phase)


def kernel_built(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    if facts.child is None or not policy.require_custom_kernel or any(b.get("binary") for b in facts.builds):
        return []
    return [_rejects(Check.NO_KERNEL, "no custom kernel was built while importing the candidate")]


def built_sources(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    """The static scan again, over the sources actually compiled (a candidate can build what its file hides), and
    what the built binaries import (a macro hides a call from any scan of text, not from the linker)."""
    if facts.child is None or policy.static_policy == "off":
        return []
    findings = scan_built_sources(facts.builds, strict=True)  # every finding; the row says what each decides here
    found = [_rejects(f.check, f"{f.message} (in the sources actually compiled)") for f in findings
             if verdict_under(f.check, policy.static_policy)]
    return found + [_rejects(f.check, f.message) if verdict_under(f.check, policy.static_policy) else
                    _note(f.check, f.message) for f in binary_findings(facts.builds)]


def compile_only(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    """The compile-only CUDA device: built is all that can be known."""
    if facts.result is None or facts.result.status != "compiled":
        return []
    if not any(b.get("cuda") for b in facts.builds):
        return [Finding(Check.NONE, NO_CUDA_SOURCES, verdict=Verdict.REJECTED)]
    return [Finding(Check.NONE, "compile-only CUDA device: the kernel and its host binding compiled; correctness "
                    "and speed need a GPU", verdict=Verdict.COMPILED),
            *(_note(Check.NONE, f"not checked: {b['skipped']}") for b in facts.builds if b.get("skipped"))]


def tampering(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    """What the parent-driven trials and the child's own integrity checks caught: inputs mutated, outputs aliased
    or not plain tensors, threads left running."""
    if facts.result is None or facts.reference is None:
        return []
    checked = facts.checked.findings if facts.checked is not None and policy.hardening else []
    return [*(replace(f, verdict=Verdict.REJECTED) for f in checked), *_process_growth(facts, policy),
            *integrity_failures(facts.result, facts.reference, policy, facts.device)]


def _process_growth(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    """Counted by the parent in the candidate's cgroup (nothing the child says): a process it started after it
    loaded, still running when its calls were over, can work while the candidate is not being timed."""
    if not policy.hardening or facts.processes is None or facts.processes[1] <= facts.processes[0]:
        return []
    loaded, ended = facts.processes
    return [_rejects(Check.PROCESSES, f"the candidate's process tree grew from {loaded} to {ended} processes after "
                     "it loaded: a process it started was still running when its calls were over")]


def outputs_readable(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    if facts.unreadable is None:
        return []
    return [Finding(
        Check.NONE, f"the candidate's outputs could not be read back: {facts.unreadable}", verdict=Verdict.CRASH)]


def call_protocol(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    if facts.protocol_broken is None:
        return []
    return [_rejects(Check.TIMING, f"the candidate's process broke the call protocol: {facts.protocol_broken}")]


def trial_count(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    if facts.reference is None or facts.outputs_count is None or facts.outputs_count == len(facts.reference.outputs):
        return []
    return [Finding(Check.NONE, "the candidate's process returned outputs for the wrong number of trials",
                    verdict=Verdict.CRASH)]


def correctness(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    """Every trial, every distribution: the first wrong output of each trial."""
    comparisons = facts.comparisons or []
    return [Finding(Check.CORRECTNESS, f"trial {index + 1} of {len(comparisons)} ({c.trial.distribution} inputs)"
                    f"{' (on a repeated call)' if c.repeated else ''}: {c.trial.message}", verdict=Verdict.INCORRECT)
            for index, c in enumerate(comparisons) if not c.trial.passed]


def numerical_contract(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    """Against a float64 run of the reference: a candidate inside the tolerance whose error is beyond the
    reference's own by more than the dtype's factor is incorrect (a less accurate computation than the one it
    replaces)."""
    contract = facts.contract
    if contract is None:
        return []
    found = skipped_note(contract) if contract.skipped else \
        contract_finding(contract.candidate, contract.reference, policy.oracle_multiple)
    return [found] if found else []


def determinism(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    if facts.deterministic is not False:
        return []
    return [_note(Check.NONDETERMINISTIC, "the trial called twice on the same inputs gave different bits (both "
                  "within tolerance): results vary from run to run")]


def ghost_kernel(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    """Forward must depend on the candidate's kernel where it is checked and where it is timed."""
    if not policy.hardening or facts.result is None:
        return []
    calls, timed = facts.result.kernel_calls, facts.timed
    timed_calls = timed.kernel_calls if timed and timed.kernel_calls is not None else calls.get("timed")
    findings = []
    if calls.get("wrapped_functions") and timed and timed.candidate_ms and not timed_calls:
        findings.append(_rejects(Check.GHOST_KERNEL, "the candidate's kernel functions were never called during the "
                                 "timed calls: what was timed is some other code path"))
    if facts.knockout_matched:
        where = "on a timed call" if timed is not None and timed.audited.knockouts else "on a call of its own"
        findings.append(_rejects(
            Check.GHOST_KERNEL, f"with every function of the candidate's extension poisoned {where}, "
            "forward() still returned the right answer: the kernel does not compute the "
            "measured output"))
    return findings


def runtime_compute(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    """PyTorch compute that forward ran, outside the candidate's kernels or inside them, however it was reached:
    strict rejects it; default says it, with the kernels' share of forward's time (on the CPU: clocked inside them
    over an audit batch among the timed calls, harness/audits/share.py) and of its work (the reference's
    FLOPs the library's calls left undone, harness/verification/work_share.py), and credits no speedup to kernels
    that do a negligible share of either: that speedup is PyTorch's (time spent spinning buys no work)."""
    census = facts.census
    ops = census["ops"] if census else {}
    share, work = facts.kernel_share, facts.work_share
    floor = policy.min_kernel_share
    negligible = any(s is not None and s < floor for s in (share, work))
    if not ops and not negligible:
        return []
    seen = ", ".join(f"{name} x{count}" for name, count in sorted(ops.items()))
    calls = f" over {census['calls']} audited calls" if census and census.get("calls") else ""
    where = "inside the candidate's kernels" if all(n.endswith(INSIDE) for n in ops) else \
        "outside the candidate's kernels" if not any(n.endswith(INSIDE) for n in ops) else "outside and inside them"
    said = (f"forward ran PyTorch's own compute {where} ({seen}{calls})" if ops else
            "forward's time went mostly outside the candidate's kernels")
    said += f"; the candidate's kernels did {share:.0%} of forward's time" if share is not None else ""
    said += (f"; the library's calls did {1 - work:.0%} of the reference's work (FLOPs), the kernels {work:.0%}"
             if work is not None and ops else "")
    if ops and verdict_under(Check.RUNTIME_COMPUTE, policy.static_policy):
        return [_rejects(Check.RUNTIME_COMPUTE, said + ": strict requires all of forward's compute in the "
                         "candidate's kernels")]
    if negligible and policy.require_custom_kernel:  # (a self-check has none)
        return [_rejects(
            Check.RUNTIME_COMPUTE, said + f": under {floor:.0%}, the speedup measured is PyTorch's, "
            "not the kernel's, so none is credited; move the work into the kernels")]
    return [_note(Check.RUNTIME_COMPUTE, said)]


def degenerate_problem(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    """Correct, but trivial answers pass every trial too: correctness here proves nothing."""
    notes = list(facts.canary_notes)
    if not facts.degenerate:
        return notes
    return [Finding(Check.DEGENERATE_PROBLEM, f"correct, but trivial answers pass every trial of this problem too "
                    f"({'; '.join(facts.degenerate)}): correctness here proves nothing, so no speedup is reported",
                    verdict=Verdict.DEGENERATE), *notes]


def cached_answers(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    """Fewer kernel calls on the checked calls than every timed call makes: an answer came from a cache."""
    timed, checked = facts.timed, facts.checked
    if timed is None or checked is None or not policy.hardening or not timed.kernel_calls:
        return []
    cached = cache_finding(checked, timed.kernel_calls, timed.candidate_calls)
    if cached is None:
        return []
    return [replace(cached, verdict=verdict_under(Check.CACHE, policy.static_policy))]


def timing_protocol(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    """What the timed calls' own checks caught (a wrong timed output is incorrect; the rest is tampering)."""
    timed = facts.timed
    if timed is None or not timed.failures:
        return []
    verdict = Verdict.INCORRECT if timed.failures[0].check == Check.TIMED_CHECK else Verdict.REJECTED
    return [replace(f, verdict=verdict) for f in timed.failures]


def timing_samples(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    reading = facts.reading
    if facts.timed is None or reading is not None:
        return []
    return [Finding(Check.NONE, "the timing phase reported no valid samples", verdict=Verdict.CRASH)]


def timing_notes(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    """How far the clock, the checks and the machine's noise let the speedup be believed."""
    reading = facts.reading
    if reading is None or facts.timed is None:
        return []
    checks = checks_note(facts.timed, policy)
    return [*([reading.doubt] if reading.doubt else []), *([checks] if checks else []), *reading.noise]


CHILD_STAGED = ("timed by the child-staged protocol{where}: the candidate's process made its own timed inputs and "
                "answered its own probes, so this speedup is not protected against a candidate that patches the "
                "harness code in its own process{verdict}")


def protocol_statement(facts: Facts, policy: EvalPolicy) -> list[Finding]:
    """No silently weaker path: a speedup the parent did not drive says so, and strict does not credit it."""
    if facts.timed is None or facts.timed.parent_reads or is_off("protocol_statement"):
        return []
    where = " (CUDA has no parent-driven path yet)" if facts.device == "cuda" else \
        " (this machine lacks a writable cgroup freezer, a sealable shared file or reading a child's memory)"
    verdict = verdict_under(Check.PROTOCOL, policy.static_policy)
    message = CHILD_STAGED.format(where=where, verdict="; strict refuses it" if verdict else "")
    return [Finding(Check.PROTOCOL, message, verdict=verdict, lead=True)]


# The order in which the checks decide: the registry's (harness/checks.py), each gate where its first row stands.
GATES: tuple[Gate, ...] = tuple(globals()[name] for name in gate_order())
# what decides before anything is timed (the float64 contract too: an approximation is never timed)
CORRECTNESS: tuple[Gate, ...] = (outputs_readable, call_protocol, trial_count, correctness, numerical_contract)


@dataclass
class Decision:
    verdict: Verdict
    findings: list[Finding] = field(default_factory=list)
    decided_by: Gate | None = None  # None: every gate passed

    def passed(self, gate: Gate) -> bool:
        """Whether `gate` ran and did not decide (the evaluation got past it)."""
        return self.decided_by is None or GATES.index(gate) < GATES.index(self.decided_by)


def decide(facts: Facts, policy: EvalPolicy, gates: Sequence[Gate] = GATES,
           notes: Sequence[Finding] = ()) -> Decision:
    """Run `gates` in order over `facts`; the first finding with a verdict decides and stops them.
    `notes`: what was gathered on the way (static, reference, telemetry), kept ahead of the gates' notes."""
    findings = list(notes)
    for gate in gates:
        found = list(gate(facts, policy))
        findings += found
        deciding = next((f for f in found if f.decides), None)
        if deciding is not None:
            return Decision(deciding.verdict or Verdict.REJECTED, findings, gate)
    return Decision(Verdict.ACCEPTED, findings)
