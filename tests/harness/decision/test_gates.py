"""The gates decide from facts alone: each is tested here on hand-made facts, without a child process."""

from __future__ import annotations

from dataclasses import replace

from harness.audits.audit import Audited
from harness.child.job import ChildResult
from harness.decision.facts import ChildFacts, Comparison, Facts
from harness.decision.gates import (CORRECTNESS, GATES, correctness, decide, ghost_kernel, protocol_statement,
                                    runtime_compute, tampering, timing_notes, timing_protocol)
from harness.isolation.sandbox import ChildOutcome
from harness.measurement.frozen_trials import CheckedTrials
from harness.measurement.timed_calls import TimedRun
from harness.policy import EvalPolicy
from harness.records import Finding, TrialResult, Verdict, rendered
from harness.verification.reference import ReferenceRun

DEFAULT = EvalPolicy()
STRICT = EvalPolicy(static_policy="strict")


def _facts(**changes: object) -> Facts:
    """A candidate that built a kernel, finished cleanly and passed two trials: every gate passes."""
    reference = ReferenceRun(init_inputs=[], trial_seeds=[1, 2], trial_inputs=[[], []], outputs=[0, 0])
    result = ChildResult(status="ok", kernel_calls={"wrapped_functions": 1, "timed": 10})
    facts = Facts("cpu", builds=[{"binary": "ext.so"}], reference=reference, outputs_count=2,
                  child=ChildFacts(ChildOutcome(returncode=0, wall_s=1.0), result, [], ""),
                  comparisons=[Comparison(TrialResult(seed=s, passed=True)) for s in (1, 2)], degenerate=[])
    return replace(facts, **changes)  # the facts are immutable: each case is a copy with its changes


def _timed(**changes: object) -> TimedRun:
    run = TimedRun(ref_ms=[2.0, 2.1, 1.9, 2.0], candidate_ms=[1.0, 1.05, 0.95, 1.0], checked_calls=300,
                   parent_reads=True, kernel_calls=40, candidate_calls=40)
    for name, value in changes.items():
        setattr(run, name, value)
    return run


def test_an_honest_candidate_passes_every_gate() -> None:
    decision = decide(_facts(timed=_timed()), DEFAULT)
    assert decision.verdict is Verdict.ACCEPTED and decision.decided_by is None
    assert not [f for f in decision.findings if f.decides]


def test_the_first_gate_that_decides_stops_the_rest() -> None:
    wrong = Comparison(TrialResult(seed=2, passed=False, message="max abs error 3.0"))
    facts = _facts(comparisons=[Comparison(TrialResult(seed=1, passed=True)), wrong], timed=_timed(failures=[Finding("timing", "x")]))
    decision = decide(facts, DEFAULT)
    assert decision.verdict is Verdict.INCORRECT and decision.decided_by is correctness
    assert [f.check for f in decision.findings] == ["correctness"]  # the timing gates never ran
    assert "trial 2 of 2" in decision.findings[0].message


def test_tampering_outranks_wrong_answers() -> None:
    wrong = [Comparison(TrialResult(seed=1, passed=False, message="off"))]
    result = ChildResult(status="ok", integrity=["mutation: forward() modified input 0 in place"])
    facts = _facts(comparisons=wrong, child=ChildFacts(ChildOutcome(0, 1.0), result, [], ""))
    decision = decide(facts, DEFAULT)
    assert decision.decided_by is tampering and decision.verdict is Verdict.REJECTED
    assert decision.findings[0].check == "mutation"


def test_a_mutating_reference_excuses_the_candidates_mutation() -> None:
    result = ChildResult(status="ok", integrity=["mutation: forward() modified input 0 in place"])
    facts = _facts(child=ChildFacts(ChildOutcome(0, 1.0), result, [], ""))
    facts.reference.mutates_inputs = True
    assert decide(facts, DEFAULT).verdict is Verdict.ACCEPTED


def test_a_knocked_out_kernel_that_still_answers_is_a_ghost() -> None:
    decision = decide(_facts(knockout_matched=True), DEFAULT)
    assert decision.decided_by is ghost_kernel and decision.findings[-1].check == "ghost-kernel"
    assert decide(_facts(knockout_matched=False), DEFAULT).verdict is Verdict.ACCEPTED


def test_runtime_compute_is_a_note_by_default_and_rejects_under_strict() -> None:
    census = {"ops": {"aten.relu": 1}, "share": 0.4}
    default = decide(_facts(census=census), DEFAULT)
    assert default.verdict is Verdict.ACCEPTED
    note = next(f for f in default.findings if f.check == "runtime-compute")
    assert "did 40% of forward's time" in note.message and not note.decides
    strict = decide(_facts(census=census), STRICT)
    assert strict.decided_by is runtime_compute and strict.verdict is Verdict.REJECTED


def test_kernels_doing_a_negligible_share_are_credited_no_speedup() -> None:
    negligible = decide(_facts(census={"ops": {"aten.mm": 1}, "share": 0.01}), DEFAULT)
    assert negligible.decided_by is runtime_compute and negligible.verdict is Verdict.REJECTED
    assert "PyTorch's, not the kernel's" in negligible.findings[-1].message
    unclocked = decide(_facts(census={"ops": {"aten.mm": 1}, "share": None}), DEFAULT)  # CUDA: no share measured
    assert unclocked.verdict is Verdict.ACCEPTED


def test_the_share_clocked_among_timed_calls_decides_over_the_census_call() -> None:
    """The census is one call at a known place, where a forward can run its kernels alone; the clocked audit batch
    lies among the timed calls: its share decides, even where the census saw no library compute at all."""
    hidden = _timed(audited=Audited(own_ns=2_000, clocked_ns=1_000_000))  # 0.2% of forward's time in the kernels
    hiding = decide(_facts(census={"ops": {}, "share": 0.9}, timed=hidden), DEFAULT)
    assert hiding.decided_by is runtime_compute and hiding.verdict is Verdict.REJECTED
    assert "did 0% of forward's time" in hiding.findings[-1].message
    honest = decide(_facts(census={"ops": {"aten.mm": 1}, "share": 0.01}, timed=_timed(audited=Audited(own_ns=6, clocked_ns=10))),
                    DEFAULT)
    assert honest.verdict is Verdict.ACCEPTED
    assert "did 60% of forward's time" in next(f for f in honest.findings if f.check == "runtime-compute").message


def test_a_wrong_timed_output_is_incorrect_and_other_timing_failures_reject() -> None:
    wrong = decide(_facts(timed=_timed(failures=[Finding("timed-check", "call 3 returned a wrong result")])), DEFAULT)
    assert wrong.decided_by is timing_protocol and wrong.verdict is Verdict.INCORRECT
    aliased = decide(_facts(timed=_timed(failures=[Finding("aliasing", "two timed calls share output memory")])), DEFAULT)
    assert aliased.verdict is Verdict.REJECTED


def test_too_few_checked_calls_and_a_noisy_aa_pair_are_said() -> None:
    noisy = _timed(checked_calls=10, copy_ms=[2.6, 2.7, 2.5, 2.6])  # the reference's copy reads 30% slower
    found = timing_notes(_facts(timed=noisy), DEFAULT)
    assert {f.check for f in found} == {"checks", "noise"} and not any(f.decides for f in found)


def test_the_child_staged_protocol_leads_the_reasons_and_strict_refuses_it() -> None:
    staged = _facts(timed=_timed(parent_reads=False))
    default = decide(staged, DEFAULT)
    assert default.verdict is Verdict.ACCEPTED
    assert rendered(default.findings + [Finding("noise", "a later note", fatal=False)])[0].startswith("[protocol]")
    strict = decide(staged, STRICT)
    assert strict.decided_by is protocol_statement and strict.verdict is Verdict.REJECTED


def test_a_child_that_died_decides_before_anything_it_reported() -> None:
    died = ChildFacts(ChildOutcome(returncode=-11, wall_s=1.0), None, [], "Segmentation fault")
    decision = decide(_facts(child=died, comparisons=None), DEFAULT)
    assert decision.verdict is Verdict.CRASH
    assert rendered(decision.findings) == [decision.findings[0].render(), "last output:\nSegmentation fault"]
    assert "SIGSEGV" in decision.findings[0].message


def test_the_correctness_gates_alone_tell_the_conversation_whether_to_go_on() -> None:
    assert set(CORRECTNESS) <= set(GATES)
    assert decide(_facts(unreadable="EOFError"), DEFAULT, CORRECTNESS).verdict is Verdict.CRASH
    assert decide(_facts(outputs_count=1), DEFAULT, CORRECTNESS).verdict is Verdict.CRASH
    assert decide(_facts(child=None), DEFAULT, CORRECTNESS).verdict is Verdict.ACCEPTED


def test_checked_trials_findings_reject() -> None:
    checked = CheckedTrials(findings=[Finding("aliasing", "output 0 of two calls is the same memory")])
    decision = decide(_facts(checked=checked), DEFAULT)
    assert decision.decided_by is tampering and decision.findings[0].render().startswith("[aliasing] output 0")


def test_a_limit_the_child_hit_decides_whatever_it_made_of_it() -> None:
    limit = Finding("build-limit", "the candidate requested more than 8 distinct builds")
    died = ChildFacts(ChildOutcome(returncode=1, wall_s=1.0), None, [], "")
    decision = decide(_facts(limit=limit, child=died), DEFAULT)
    assert decision.verdict is Verdict.REJECTED and decision.findings[0].check == "build-limit"


def test_an_error_beyond_the_references_own_by_more_than_the_factor_is_incorrect() -> None:
    from harness.verification.oracle import NumericalContract, OracleError

    sloppy = NumericalContract(candidate=OracleError(max_abs=1e-3, relative=1e-4, eps=1.2e-7),
                               reference=OracleError(max_abs=1e-7, relative=1e-8, eps=1.2e-7))
    decision = decide(_facts(contract=sloppy, deterministic=False), DEFAULT)
    assert decision.verdict is Verdict.INCORRECT and decision.findings[-1].check == "oracle"
    noted = decide(_facts(contract=NumericalContract(candidate=sloppy.reference, reference=sloppy.reference),
                          deterministic=False), DEFAULT)
    assert noted.verdict is Verdict.ACCEPTED and "nondeterministic" in {f.check for f in noted.findings}
    close = NumericalContract(candidate=OracleError(max_abs=1e-7, relative=2e-8, eps=1.2e-7),
                              reference=OracleError(max_abs=1e-7, relative=1e-8, eps=1.2e-7))
    assert not [f for f in decide(_facts(contract=close, deterministic=True), DEFAULT).findings if f.check]
