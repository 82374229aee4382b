"""What an evaluation produces: the verdict, its reasons, and every measurement behind them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from harness.device import Device


class Verdict(StrEnum):
    ACCEPTED = "accepted"
    INCORRECT = "incorrect"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    CRASH = "crash"
    REJECTED = "rejected"
    # Compile-only CUDA device (nvcc but no GPU): the kernel built; correctness and speed are unknown.
    COMPILED = "compiled"
    # Correct, but on a problem whose canaries (zeros, passthrough...) pass too: correctness there proves
    # nothing, so no speedup is reported and metrics count it apart.
    DEGENERATE = "degenerate"


class Unjudged(StrEnum):
    """Why a slot of a run or a problem of a sweep has no harness verdict. The other half of the one outcome
    vocabulary: an outcome is a Verdict or one of these, never a free-form string."""

    LLM_ERROR = "llm_error"  # the model call failed (after retries)
    UNPARSEABLE = "unparseable"  # the reply had no complete ModelNew file
    MISSING = "missing"  # no solution file matches the problem
    PROBLEM_ERROR = "problem_error"  # the problem itself is broken (its reference fails)
    NOT_EVALUATED = "not evaluated"  # a parsed kernel the run stopped before evaluating
    NO_BASELINE = "no_baseline"  # an accepted kernel with no torch.compile time to compare against


OUTCOMES = [v.value for v in Verdict] + [u.value for u in Unjudged]
Outcome = Verdict | Unjudged


def outcome(value: str) -> Outcome:
    """The outcome a stored or reported value names; ValueError for anything outside the vocabulary."""
    return Verdict(value) if value in Verdict._value2member_map_ else Unjudged(value)


class Check(StrEnum):
    """Every finding's tag: what people, the judge model and tests key on (stored and printed as the value).
    Each has one row in the registry, harness/checks.py, which says what it decides and where it holds."""

    NONE = ""  # a message that stands alone: a crash, a timeout, a compile-only build
    # the static policy (harness/verification/static_check.py, source_scan.py)
    SYNTAX = "syntax"
    NO_MODELNEW = "no-modelnew"
    FORBIDDEN_API = "forbidden-api"
    HARNESS_ALIAS = "harness-alias"
    MONKEYPATCH = "monkeypatch"
    PROBLEM_OVERRIDE = "problem-override"
    GLOBAL_STATE = "global-state"
    TRY_FALLBACK = "try-fallback"
    PRECISION = "precision"
    TORCH_COMPUTE = "torch-compute"
    LIBRARY_COMPUTE = "library-compute"
    RUNTIME_LINKING = "runtime-linking"  # read from the built binary (harness/verification/binary_imports.py)
    STREAMS = "streams"
    FAST_MATH = "fast-math"
    PYTHON_CAPI = "python-capi"
    PROFILER_HOOK = "profiler-hook"
    OPERATOR_OVERRIDE = "operator-override"
    INCLUDE = "include"
    IO = "io"
    # the static policy: forbidden modules and calls, tagged by what they reach
    BUILTINS = "builtins"
    CONCURRENCY = "concurrency"
    DATABASES = "databases"
    DEBUGGER = "debugger"
    DESERIALIZATION = "deserialization"
    DYNAMIC = "dynamic"
    EXIT = "exit"
    FILE = "file"
    IMPORT = "import"
    IMPORT_MACHINERY = "import-machinery"
    INTROSPECTION = "introspection"
    MONKEYPATCHING = "monkeypatching"
    NETWORK = "network"
    PROCESS = "process"
    RAW_MEMORY = "raw-memory"
    SIGNAL = "signal"
    STDIN = "stdin"
    SUBPROCESSES = "subprocesses"
    # limits and the build
    BUILD_LIMIT = "build-limit"
    SCRATCH_LIMIT = "scratch-limit"
    NO_KERNEL = "no-kernel"
    # tampering, seen by the parent or reported by the child
    MUTATION = "mutation"
    ALIASING = "aliasing"
    OUTPUT_TYPE = "output-type"
    WORK_AFTER_RETURN = "work-after-return"
    THREADS = "threads"
    PROCESSES = "processes"
    PRECISION_SETTINGS = "precision-settings"
    DISGUISED = "disguised"
    HELD_OUTPUT = "held-output"
    TIMING = "timing"
    # answers
    CORRECTNESS = "correctness"
    ORACLE = "oracle"
    NONDETERMINISTIC = "nondeterministic"
    TIMED_CHECK = "timed-check"
    GHOST_KERNEL = "ghost-kernel"
    RUNTIME_COMPUTE = "runtime-compute"
    DEGENERATE_PROBLEM = "degenerate-problem"
    ABLATION = "ablation"
    CACHE = "cache"
    # how far the speedup is believed
    CHECKS = "checks"
    NOISE = "noise"
    PROTOCOL = "protocol"
    TELEMETRY = "telemetry"
    PHYSICS = "physics"
    RE_MEASURED = "re-measured"
    # gathered on the way
    DISTRIBUTION = "distribution"
    PARAMETERS = "parameters"
    NON_FINITE = "non-finite"
    ENVELOPE = "envelope"
    # containments: defences that write no finding of their own (what they stop shows as another check's, or as
    # nothing gained); a tag so that each has its registry row and its attack tests a mark
    JAIL_HOME = "jail-home"
    JAIL_BINDS = "jail-binds"
    JAIL_UID = "jail-uid"
    JAIL_ROOT = "jail-root"
    FREEZE = "freeze"
    PARENT_SLOTS = "parent-slots"
    FRESH_FACTOR = "fresh-factor"
    FRESH_INTEGERS = "fresh-integers"

    @classmethod
    def read(cls, tag: str) -> Check:
        """The tag a child reported (its text is the candidate's process's to forge): unknown ones stand alone."""
        return cls(tag) if tag in cls._value2member_map_ else cls.NONE


@dataclass(frozen=True)
class Finding:
    """One thing a check found: a stable tag (tests and the judge model key on it; empty for the few messages
    that have none), a message for people and the judge model, and what it decides.

    `fatal`: the static policy forbids it (static checks only); `verdict`: the verdict it decides, None for a
    note; `lead`: a note important enough to be read before the others (a child-staged speedup, a physics doubt).
    """

    check: Check
    message: str
    line: int | None = None
    fatal: bool = True
    verdict: Verdict | None = None
    lead: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "check", Check(self.check))  # a tag outside the vocabulary is a bug: it raises

    def render(self) -> str:
        where = f" (line {self.line})" if self.line else ""
        return f"[{self.check}] {self.message}{where}" if self.check else f"{self.message}{where}"

    @property
    def decides(self) -> bool:
        return self.verdict is not None


def rendered(findings: list[Finding]) -> list[str]:
    """The reasons people and models read: what decided first, then lead notes, then the rest in order."""
    deciding = [f for f in findings if f.decides]
    lead = [f for f in findings if not f.decides and f.lead]
    return [f.render() for f in deciding + lead + [f for f in findings if not f.decides and not f.lead]]


class TrialResult(BaseModel):
    """One correctness trial: one seed, one input set, all outputs compared."""

    seed: int
    distribution: str = "default"
    passed: bool
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    message: str = ""


class TimingStats(BaseModel):
    """Raw per-call samples (milliseconds) and their summary."""

    samples_ms: list[float]
    median_ms: float
    p25_ms: float
    p75_ms: float


class OracleError(BaseModel):
    """One side's error against the float64 oracle, the worst over the outputs and trials compared
    (harness/verification/oracle.py measures it)."""

    max_abs: float  # the largest absolute difference at a position where the oracle is finite
    relative: float  # norm-wise: ||got - oracle|| / ||oracle|| (||got - oracle|| where the oracle is all zeros)
    eps: float  # machine epsilon of the least precise output compared: no error below it means anything
    dtype: str = "float32"  # that output's dtype, whose factor and floor apply (oracle.py `FACTOR`, `FLOOR_EPS`)
    count: int = 1 << 30  # the fewest elements of an output compared (a small output's floor is higher)


class Numerics(BaseModel):
    """Both errors against the float64 oracle, or why there is no oracle (`skipped`): the numerical contract as
    an evaluation records it (harness/verification/oracle.py `NumericalContract` adds what it decides)."""

    candidate: OracleError | None = None
    reference: OracleError | None = None
    skipped: str | None = None
    multiple: float | None = None  # the policy's factor, where it sets one; else the dtype's `FACTOR`


class Evaluation(BaseModel):
    """The record of judging one candidate. Every field is decided in the parent process."""

    verdict: Verdict
    tier: str = "full"  # the policy tier that produced it: "screening" ranks variants only, never stored as a result
    reasons: list[str] = Field(default_factory=list)  # rendered from `findings` at the harness's edge
    findings: list[Finding] = Field(default_factory=list)  # typed: what decided the verdict, and every note
    problem_name: str
    problem_fingerprint: str
    candidate_hash: str
    device: Device
    device_info: dict[str, Any] = Field(default_factory=dict)
    # the checks' version that judged it (harness/decision/version.py); None: recorded before versions
    checks_version: str | None = None
    speedup: float | None = None
    speedup_ci: tuple[float, float] | None = None  # 95%, widened by the A/A spread where the noise floor ran
    speedup_significant: bool | None = None  # speedup_ci excludes 1.0: the candidate differs beyond the noise
    noise_floor: tuple[float, float] | None = None  # the A/A interval: the reference timed against a copy of itself
    ref_timing: TimingStats | None = None
    candidate_timing: TimingStats | None = None
    trials: list[TrialResult] = Field(default_factory=list)
    build: dict[str, Any] = Field(default_factory=dict)
    isolation: dict[str, Any] = Field(default_factory=dict)
    phase_seconds: dict[str, float] = Field(default_factory=dict)
    policy: dict[str, Any] = Field(default_factory=dict)
    roofline: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)  # profiler records (ncu), filled on demand
    numerics: Numerics | None = None  # both sides' error against a float64 oracle (verification/oracle.py)
    deterministic: bool | None = None  # a trial called twice on the same inputs gave the same bits
    envelope: dict[str, Any] | None = None  # correctness (and speed) at other sizes (harness/shipping/envelope.py)

    @property
    def accepted(self) -> bool:
        return self.verdict is Verdict.ACCEPTED

    @property
    def screened(self) -> bool:
        """Produced by the screening tier: a ranking among variants, not a result anyone may read as one."""
        return self.tier != "full"

    @property
    def ref_ms(self) -> float | None:
        return self.ref_timing.median_ms if self.ref_timing else None

    @property
    def candidate_ms(self) -> float | None:
        return self.candidate_timing.median_ms if self.candidate_timing else None

    def summary(self) -> dict[str, Any]:
        """The CLI's JSON contract: verdict, reasons, speedup, ref_ms, candidate_ms, and the rest."""
        data = self.model_dump(mode="json")
        data["ref_ms"] = self.ref_ms
        data["candidate_ms"] = self.candidate_ms
        return data
