"""`kernelwright eval`: resolve the inputs, evaluate, record. Called by the CLI, testable without it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.pipeline import Progress, evaluate
from harness.policy import EvalPolicy
from harness.records import Evaluation
from harness.device import device_notice, resolve_device
from harness.execution.profile import profile_accepted
from harness.shipping.envelope import attach_envelope
from kernelbench.bundled import resolve_problem
from kernelbench.problem import Problem, ProblemError
from kernelbench.shrink import ShrinkResult, shrink_problem
from store import open_store, record_evaluation
from kernelwright.errors import UsageError  # re-exported: services raise it from here


@dataclass
class EvalOutcome:
    problem: Problem
    evaluation: Evaluation
    evaluation_id: int | None
    shrink: ShrinkResult | None = None
    source: str | None = None  # the candidate's file: a build error's lines are mapped back to it


def read_candidate(path: Path) -> str:
    if not path.exists():
        raise UsageError(f"{path}: no such candidate file")
    if path.is_dir():
        raise UsageError(f"{path} is a folder; give one candidate .py file")
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read it ({exc})") from exc


MEMORY_COPIES = 3  # the reference's and the candidate's processes each hold the inputs and outputs, plus clones


def unallocatable(problem: Problem, device: str, memory_limit_mb: int) -> str | None:
    """Why a problem's tensors cannot fit this machine's free memory, or the candidate's memory limit, else None
    (CPU only: its footprint is measured on the meta device)."""
    import psutil

    from kernelbench.shrink import measure

    if device != "cpu" or problem.shrunk:
        return None
    try:
        footprint = measure(problem.source)
    except ProblemError:
        return None  # the evaluation itself says what is wrong with the problem
    available = psutil.virtual_memory().available
    needs = f"{problem.key} needs {footprint.bytes / 2**30:.1f} GiB for its inputs, outputs and parameters"
    if footprint.bytes * MEMORY_COPIES > available:
        return (f"{needs} (about {MEMORY_COPIES}x that to evaluate; this machine has {available / 2**30:.1f} GiB "
                "free)")
    if footprint.bytes > memory_limit_mb * 2**20:
        return f"{needs} (more than the candidate's memory limit of {memory_limit_mb / 1024:.1f} GiB)"
    return None


SHRINK_HINT = ("add --shrink to rescale sizes to the CPU budget, or write shrunk copies with `kernelwright problems "
               "shrink PATH --write DIR`")


_CPU_FLOPS_PER_S = 2e10  # one modern x86 core, vectorised: about what a PyTorch matmul reaches at one thread


def cost_note(problem: Problem, device: str, policy: EvalPolicy) -> str | None:
    """Before a long CPU evaluation: what one forward costs at one thread and a lower bound on the evaluation's
    time (reference, its A/A copy and the candidate each run the trials, warm-up and fewest timed calls), with the
    --shrink hint; None for a problem within the CPU budget, or not on the CPU."""
    from kernelbench.shrink import Budget, measure

    if device != "cpu" or problem.shrunk:
        return None
    try:
        footprint = measure(problem.source)
    except ProblemError:
        return None
    if footprint.fits(Budget()):
        return None
    seconds = footprint.all_flops / _CPU_FLOPS_PER_S
    calls = 3 * (policy.trials + policy.warmup_calls + policy.min_timed_calls)
    return (f"{problem.label}: one forward is {footprint.all_flops:.2g} FLOP and {footprint.bytes / 2**20:.0f} MiB, "
            f"about {seconds:.1f} s at one thread; at least {calls} forwards make this evaluation take "
            f"{seconds * calls / 60:.0f}+ minutes: --shrink rescales it to the CPU budget")


def refuse_unallocatable(problem: Problem, device: str, memory_limit_mb: int) -> None:
    """A usage error that points to --shrink, not a failed allocation minutes later."""
    reason = unallocatable(problem, device, memory_limit_mb)
    if reason:
        raise UsageError(f"{reason}: {SHRINK_HINT}")


def target_problem(problem_spec: str, shrink: bool, precision: str = "fp32") -> tuple[Problem, ShrinkResult | None]:
    """The problem named by `problem_spec`, rescaled to the CPU budget when `shrink`, at `precision` (its
    parameters and floating inputs cast: fp16, bf16; fp32 leaves it as written)."""
    from harness.shipping.precision import DTYPES, at_precision

    if precision not in DTYPES:
        raise UsageError(f"--precision {precision!r}: choose one of {', '.join(DTYPES)}")
    problem = resolve_problem(problem_spec)
    shrunk = shrink_problem(problem) if shrink else None
    problem = shrunk.problem if shrunk else problem
    return (at_precision(problem, precision) if precision != "fp32" else problem), shrunk


POLICY_LEVELS = ("strict", "default")


def eval_policy(level: str, whole_model: bool = False, **fields: object) -> EvalPolicy:
    """The evaluation policy for `--policy LEVEL` and the options given with it; `whole_model`: as optimize-model
    judges its patched.py (regions/verify.py whole_model_policy)."""
    if level not in POLICY_LEVELS:
        raise UsageError(f"--policy {level!r}: choose strict or default")
    policy = EvalPolicy(static_policy=level, **{name: value for name, value in fields.items() if value is not None})
    if whole_model:
        from regions.verify import whole_model_policy

        return whole_model_policy(policy)
    return policy


def judge(problem_spec: str, candidate_path: Path | None, self_check: bool, device: str, policy: EvalPolicy,
          db_url: str | None, shrink: bool = False, store: bool = True, progress: Progress | None = None,
          profile: bool = False, shapes: list[str] | None = None, precision: str = "fp32") -> EvalOutcome:
    """`kernelwright eval`: judge a candidate file, or with `self_check` time the problem against itself."""
    if self_check == (candidate_path is not None):
        raise UsageError("give a CANDIDATE file to judge, or --self-check to time the problem against itself (not "
                         "both)")
    if self_check:
        return run_self_check(problem_spec, device, policy, shrink=shrink, progress=progress, precision=precision)
    assert candidate_path is not None
    return run_eval(problem_spec, candidate_path, device, policy, db_url, shrink=shrink, store=store,
                    progress=progress, profile=profile, shapes=shapes, precision=precision)


def eval_holds(outcome: EvalOutcome, self_check: bool) -> bool:
    """Exit status 0: the candidate is accepted; for a self-check, the reference read the same as itself."""
    return outcome.evaluation.accepted and not (self_check and outcome.evaluation.speedup_significant)


def run_eval(problem_spec: str, candidate_path: Path, device: str, policy: EvalPolicy, db_url: str | None,
             shrink: bool = False, store: bool = True, progress: Progress | None = None,
             profile: bool = False, shapes: list[str] | None = None, precision: str = "fp32") -> EvalOutcome:
    source = read_candidate(candidate_path)
    problem, shrunk = target_problem(problem_spec, shrink, precision)
    declared = _declared_shapes(problem, shapes)
    sessions = open_store(db_url) if store else None  # fail on a bad --db before minutes of building
    resolved = resolve_device(device)
    refuse_unallocatable(problem, resolved, policy.memory_limit_mb)
    note = cost_note(problem, resolved, policy)
    if note and progress:
        progress(note)
    evaluation = evaluate(problem, source, resolved, policy, progress=progress)
    # correct at the problem's own shape: and at the sizes around it (timed at one where the user declared them)?
    attach_envelope(evaluation, problem, source, resolved, policy, declared, timed=1 if declared else 0,
                    progress=progress)
    if profile:
        if progress and evaluation.accepted and resolved == "cuda":
            progress("profiling the accepted kernel with Nsight Compute")
        profile_accepted(problem, source, evaluation, policy)
    notice = device_notice(device, resolved)
    if notice:
        evaluation.reasons.insert(0, notice)
    evaluation_id = None
    if sessions is not None:
        evaluation_id = record_evaluation(sessions, problem, source, evaluation, origin=str(candidate_path))
    return EvalOutcome(problem, evaluation, evaluation_id, shrunk, source)


def _declared_shapes(problem: Problem, shapes: list[str] | None) -> list[dict[str, int]] | None:
    """`--shapes NAME=N,...` as size dicts, checked against the problem before anything runs; a usage error that
    says what is wrong."""
    from harness.shipping.envelope import parse_shapes, variants

    if not shapes:
        return None
    try:
        declared = parse_shapes(shapes)
        variants(problem, declared)  # names that are no size constant, sizes the reference cannot run
    except ValueError as exc:
        raise UsageError(f"{exc} (write NAME=N,NAME=N, e.g. --shapes batch_size=3,dim=1000)") from None
    except ProblemError as exc:
        raise UsageError(f"--shapes: {exc}") from None
    return declared


def run_self_check(problem_spec: str, device: str, policy: EvalPolicy, shrink: bool = False,
                   progress: Progress | None = None, precision: str = "fp32") -> EvalOutcome:
    """The problem's own Model timed as a candidate (harness/measurement/self_check.py): the right answer is 1.00x,
    so what it prints is what this machine can resolve now. Never stored: it is no kernel."""
    from harness.measurement.self_check import self_check_policy, self_check_source

    problem, shrunk = target_problem(problem_spec, shrink, precision)
    resolved = resolve_device(device)
    refuse_unallocatable(problem, resolved, policy.memory_limit_mb)
    evaluation = evaluate(problem, self_check_source(problem), resolved, self_check_policy(policy), progress=progress)
    return EvalOutcome(problem, evaluation, None, shrunk)


# what the static and runtime checks say about a candidate's kernel: the self-check's candidate is the problem's
# own Model, which has none by design, so these say nothing about an A/A measurement
_NOT_ABOUT_A_A = ("[problem-override]", "[no-kernel]", "[ghost-kernel]", "[runtime-compute]", "[torch-fallback]")


def self_check_reasons(reasons: list[str]) -> list[str]:
    """The reasons a self-check prints: what concerns timing the reference against itself."""
    return [reason for reason in reasons if not reason.startswith(_NOT_ABOUT_A_A)]


def self_check_verdict(evaluation: Evaluation) -> str:
    """One line: what the A/A measurement says about this machine now."""
    if not evaluation.accepted or evaluation.speedup is None or evaluation.speedup_ci is None:
        return f"self-check could not time the problem: {evaluation.verdict.value}"
    low, high = evaluation.speedup_ci
    precision = evaluation.isolation.get("precision") or {}
    spread = precision.get("between_process_spread")
    resolves = f"; two copies of the reference disagreed by up to {spread:.1%}" if spread is not None else ""
    if low <= 1.0 <= high:
        return (f"self-check: the reference against itself read {evaluation.speedup:.3f}x [{low:.3f}-{high:.3f}], "
                f"which holds 1.0: speedups outside about {max(1 - low, high - 1):.1%} are resolvable here now"
                f"{resolves}")
    return (f"self-check: the reference against itself read {evaluation.speedup:.3f}x [{low:.3f}-{high:.3f}], "
            f"which leaves 1.0 out: this machine times the two sides differently now{resolves}")


__all__ = ["EvalOutcome", "ProblemError", "SHRINK_HINT", "UsageError", "eval_holds", "eval_policy", "judge",
           "read_candidate", "refuse_unallocatable", "run_eval", "run_self_check", "self_check_verdict",
           "target_problem", "unallocatable"]
