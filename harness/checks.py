"""The registry: every check declared once, as one row.

A row says, for one finding tag (`Check`, harness/records.py): the gate that decides it (by its function's name in
harness/decision/gates.py; rows run in this order, so the gates' order is derived from it), what a finding with the
tag decides under each static-policy level (strictness is data here, read by the gates, never an `if` of their own),
the test-only switch that turns its defence off (harness/defences.py), the protocol paths it holds on, a one-line
doc and the property it enforces. Attack tests name the check they prove with `@pytest.mark.proves(Check.X)`.

Adding a check: its fact (harness/decision/facts.py) and the code that gathers it, its tag in `Check`, one row
here, its gate (where it decides something new), and attack tests marked with its tag. harness/README.md walks
through it; docs/defences.md and docs/verdicts.md's tables are generated from these rows
(`python -m tests.harness.proofs --write`).

Imports only harness.records: harness/defences.py, read by the lowest rooms, derives its switches from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

from harness.records import Check, Verdict

Level = Literal["strict", "default", "off"]
PATHS = ("parent-driven CPU", "child-staged CPU", "CUDA")  # the timing protocols (docs/defences.md)
ALL = PATHS
PARENT = ("parent-driven CPU",)
STAGED = ("child-staged CPU", "CUDA")
CPU = ("parent-driven CPU", "child-staged CPU")
_R, _I, _D = Verdict.REJECTED, Verdict.INCORRECT, Verdict.DEGENERATE


class Levels(NamedTuple):
    """What a finding decides under each `EvalPolicy.static_policy` level; None: a note."""

    strict: Verdict | None
    default: Verdict | None
    off: Verdict | None


NOTE = Levels(None, None, None)
EVERY = Levels(_R, _R, _R)
STATIC = Levels(_R, _R, None)  # forbidden by the static policy: off (a test-only level) lets it run
STRICT = Levels(_R, None, None)  # strict refuses it; default says it


@dataclass(frozen=True)
class Row:
    tag: Check
    gate: str | None  # the gate (harness/decision/gates.py) that decides it; None: a note gathered on the way, or
    # a containment that writes no finding
    levels: Levels | None  # None: its verdict is its own (a child's end), or it writes no finding (a containment)
    doc: str  # one line: what the check looks at
    enforces: str = ""  # the property it defends
    switch: str | None = None  # test-only: turns the defence off (harness/defences.py)
    paths: tuple[str, ...] = ALL
    needs: str = ""  # what the machine must allow for it to hold (root, a writable cgroup)
    measured: str = ""  # what its attack gained with the switch off, where measured (docs/defences.md)


def _static(tag: Check, doc: str, levels: Levels = STATIC, enforces: str = "") -> Row:
    return Row(tag, "static_policy", levels, doc, enforces or "what forward computes and how is visible in its "
               "source, and nothing in the candidate reaches the harness, the timer or the machine")


# In decision order: the first row naming a gate places it (see `gate_order`). Tampering comes before correctness
# (a candidate that mutates its inputs is rejected, whatever its answers were); correctness before anything about
# speed; a timed call's own checks before how its answer was computed. A gate with no tag of its own (it decides
# a message that stands alone, or carries the tags of another check's findings) has a row tagged NONE.
ROWS: tuple[Row, ...] = (
    _static(Check.SYNTAX, "the candidate's file does not parse", EVERY),
    _static(Check.NO_MODELNEW, "no `class ModelNew` at module level", EVERY),
    _static(Check.FORBIDDEN_API, "introspection, file reading, network or environment access, dynamic code, "
            "threads or processes from Python"),
    _static(Check.HARNESS_ALIAS, "names the harness's or the problem's modules"),
    _static(Check.MONKEYPATCH, "assigns to or patches torch, timers, builtins, os or sys (the child also reports "
            "a harness name replaced while it ran)"),
    _static(Check.PROBLEM_OVERRIDE, "redefines get_inputs or the problem's other functions (defining them inside "
            "ModelNew only under strict)"),
    _static(Check.GLOBAL_STATE, "process-wide backend settings and `global` state that outlives a call", STRICT),
    _static(Check.TRY_FALLBACK, "a try/except whose handler computes or returns: the fallback would be timed"),
    _static(Check.PRECISION, "computes in reduced precision (Python casts, C++ half types)", STRICT),
    _static(Check.TORCH_COMPUTE, "PyTorch's own compute in ModelNew's methods or called from C++", STRICT),
    _static(Check.LIBRARY_COMPUTE, "a vendor library (cuBLAS, cuDNN...) called from C++", STRICT),
    _static(Check.STREAMS, "creates CUDA streams, sets stream attributes or binds a library handle to a stream"),
    _static(Check.FAST_MATH, "builds with fast-math flags"),
    _static(Check.PYTHON_CAPI, "reaches the Python interpreter from C++"),
    _static(Check.PROFILER_HOOK, "installs an ATen/profiler callback"),
    _static(Check.OPERATOR_OVERRIDE, "registers kernels for PyTorch's own (aten) operators"),
    _static(Check.INCLUDE, "includes a file by absolute or parent path"),
    _static(Check.IO, "file, process, network or environment access from C++ (its source, and the built library's "
            "imports: open, read, socket, getenv... read from the binary)", enforces="no file, network or environment "
            "access from the candidate"),
    _static(Check.BUILTINS, "imports builtins"),
    _static(Check.CONCURRENCY, "imports asyncio"),
    _static(Check.DATABASES, "imports sqlite3 or sqlalchemy"),
    _static(Check.DEBUGGER, "calls breakpoint()"),
    _static(Check.DESERIALIZATION, "imports pickle"),
    _static(Check.DYNAMIC, "calls eval, exec or compile: dynamic code"),
    _static(Check.EXIT, "imports atexit: exit hooks"),
    _static(Check.FILE, "opens a file to read, or imports shutil"),
    _static(Check.IMPORT, "calls __import__"),
    _static(Check.IMPORT_MACHINERY, "imports importlib"),
    _static(Check.INTROSPECTION, "imports inspect or gc, or calls globals(), locals(), vars()"),
    _static(Check.MONKEYPATCHING, "calls setattr or delattr on anything but itself"),
    _static(Check.NETWORK, "imports socket, urllib, http, requests or httpx"),
    _static(Check.PROCESS, "imports resource: process limits"),
    _static(Check.RAW_MEMORY, "imports ctypes or mmap"),
    _static(Check.SIGNAL, "imports signal: signal handlers"),
    _static(Check.STDIN, "calls input()"),
    _static(Check.SUBPROCESSES, "imports subprocess"),
    Row(Check.BUILD_LIMIT, "limits", EVERY, "more distinct builds, or more build time, than the policy allows",
        "builds cannot exhaust the machine"),
    Row(Check.SCRATCH_LIMIT, "limits", EVERY, "the candidate filled its scratch folder",
        "the candidate's writes are bounded"),
    Row(Check.NONE, "child_ended", None, "the child crashed, timed out, ran out of memory or reported a failure "
        "(crash, timeout, compile_error, runtime_error)"),
    Row(Check.NO_KERNEL, "kernel_built", EVERY, "no custom kernel was built (statically: none is ever built, or "
        "ModelNew inherits Model's forward)", "forward is the candidate's kernel, not the reference"),
    Row(Check.NONE, "built_sources", STATIC, "the static scan again, over the sources actually compiled (it "
        "carries the static tags)", "a candidate cannot build what its file hides"),
    Row(Check.RUNTIME_LINKING, "built_sources", STATIC, "a built library imports the run-time loader or its view of "
        "the loaded code (the whole family: dlopen, dlsym, dladdr, dlinfo, dl_iterate_phdr, getauxval, _dl_*, "
        "__libc_dl*...), read from its binary", "a built kernel library finds no code at run time: every library "
        "function it calls is named in its binary, where the library-compute check reads it"),
    Row(Check.NONE, "compile_only", Levels(Verdict.COMPILED, Verdict.COMPILED, Verdict.COMPILED),
        "compile-only CUDA device: built is all that can be known"),
    Row(Check.MUTATION, "tampering", EVERY, "forward() modified its inputs in place (the reference does not)",
        "every call sees the inputs it was given"),
    Row(Check.ALIASING, "tampering", EVERY, "an output shares memory with an input, a parameter or another "
        "call's output", "every output is a call's own"),
    Row(Check.OUTPUT_TYPE, "tampering", EVERY, "an output is not a plain dense tensor on the device",
        "outputs are read as they are, not through a subclass"),
    Row(Check.WORK_AFTER_RETURN, "tampering", EVERY, "an output kept changing after forward() returned",
        "the timer holds all the work"),
    Row(Check.THREADS, "tampering", EVERY, "threads started, left running, or a changed thread count (also "
        "static)", "the candidate gets the CPUs the reference gets"),
    Row(Check.PRECISION_SETTINGS, "tampering", EVERY, "the candidate's process changed its precision settings (TF32, "
        "the float32 matmul precision, reduced-precision reductions: harness/values/precision.py) or started with "
        "others than the reference was computed with (also static: `precision`)",
        "both sides compute and are timed at the same precision"),
    Row(Check.PROCESSES, "tampering", EVERY, "the candidate's cgroup holds more processes when its calls are over "
        "than after it loaded (also static: imports of process modules)",
        "no process of the candidate works while it is not timed", "processes", needs="cgroup v1 or v2 writable"),
    Row(Check.DISGUISED, "tampering", EVERY, "a call into the candidate's own function answered by PyTorch (an "
        "argument overriding __torch_function__, a mode other than the census's)",
        "the kernel switch counts and times the candidate's own code"),
    Row(Check.NONE, "outputs_readable", Levels(Verdict.CRASH, Verdict.CRASH, Verdict.CRASH),
        "the candidate's outputs could not be read back"),
    Row(Check.TIMING, "call_protocol", EVERY, "the candidate's process broke the call or timing protocol (also: "
        "CUDA events beyond the parent's clock, a note)", "the parent drives every call"),
    Row(Check.NONE, "trial_count", Levels(Verdict.CRASH, Verdict.CRASH, Verdict.CRASH),
        "outputs for the wrong number of trials"),
    Row(Check.CORRECTNESS, "correctness", Levels(_I, _I, _I), "a trial's output differs from the reference's "
        "beyond the tolerance (secret seeds, eight input distributions, structured parameters and buffers redrawn)",
        "the answer is right on inputs no candidate can guess"),
    Row(Check.ORACLE, "numerical_contract", Levels(_I, _I, _I), "error against a float64 run of the reference "
        "beyond the reference's own by more than the output dtype's factor (float32 8x, float16/bfloat16 2x, over a "
        "floor near the dtype's rounding)", "no less accurate than the reference"),
    Row(Check.NONDETERMINISTIC, "determinism", NOTE, "the same trial called twice gave different bits"),
    Row(Check.TIMED_CHECK, "timing_protocol", Levels(_I, _I, _I), "every timed call's output probed at 16 secret "
        "positions, some compared whole (its other failures, whatever their tag, reject)",
        "a timed call is as right as a checked one", "probes"),
    Row(Check.HELD_OUTPUT, "timing_protocol", EVERY, "an output the caller still holds was overwritten by a later "
        "batch", "an output stays the caller's while it is held", "held_outputs", PARENT),
    Row(Check.GHOST_KERNEL, "ghost_kernel", EVERY, "the kernel was never called on the timed calls, or forward "
        "still answered with every kernel function poisoned on a timed call",
        "forward depends on the candidate's kernel where it is timed", "knockout"),
    Row(Check.RUNTIME_COMPUTE, "runtime_compute", STRICT, "PyTorch compute outside the candidate's kernels on an "
        "audited timed call; under a 5% share of forward's time (CPU) or of the work no speedup is credited at any "
        "level (policy.min_kernel_share: whole-model judging lowers it, regions/verify.py)",
        "the speedup measured is the kernels'"),
    Row(Check.DEGENERATE_PROBLEM, "degenerate_problem", Levels(_D, _D, _D), "zeros, ones, the input passed "
        "through or a constant pass every trial", "correctness proves something on this problem",
        "trivial_canaries", measured="9.5x and 15.9x accepted"),
    Row(Check.ABLATION, "degenerate_problem", NOTE, "every term and part of the reference must matter (term "
        "canaries, the ablation): what could not be checked is a note; a part that does not matter is "
        "degenerate-problem", "no term of the reference can be skipped under the tolerance", "term_ablation",
        measured="2.5-2.8x accepted"),
    Row(Check.CACHE, "cached_answers", STRICT, "fewer kernel calls on the checked calls than every timed call "
        "makes (also static: outputs looked up by their inputs' bytes)", "no answer comes from a cache"),
    Row(Check.NONE, "timing_samples", Levels(Verdict.CRASH, Verdict.CRASH, Verdict.CRASH),
        "the timing phase reported no valid samples"),
    Row(Check.CHECKS, "timing_notes", NOTE, "fewer timed calls checked than the policy asks (the detection "
        "probability)"),
    Row(Check.NOISE, "timing_notes", NOTE, "the A/A pair disagrees, or other tasks waited for a CPU"),
    Row(Check.PROTOCOL, "protocol_statement", STRICT, "a speedup timed by the child-staged protocol says so",
        "no silently weaker path", "protocol_statement", STAGED),
    Row(Check.TELEMETRY, None, NOTE, "the GPU throttled, other processes used it, or its clock fell while timed"),
    Row(Check.PHYSICS, None, NOTE, "faster than half the roofline floor"),
    Row(Check.RE_MEASURED, None, NOTE, "a speedup above `implausible_speedup` measured again in a fresh process"),
    Row(Check.DISTRIBUTION, None, NOTE, "trials reach past the problem's own range (uniform at 4x its magnitude, "
        "symmetric where the reference allows; large at magnitudes up to 1000), narrowed only where the reference "
        "is not finite; a note where even the narrowest is not",
        "a kernel is right wherever the reference is defined, not only on the problem's own range", "wide_inputs"),
    Row(Check.PARAMETERS, None, NOTE, "every floating parameter (and buffer or tensor attribute drawn at random) "
        "redrawn i.i.d. at its own mean and std, and state structured at init (one value, or a parameter of two: "
        "an identity) around its init scale, for every trial and timed call (less, where the reference fails "
        "with it redrawn)", "no kernel relies on the problem's initial parameter values", "parameter_redraw"),
    Row(Check.NON_FINITE, None, NOTE, "the reference gives inf on the problem's own inputs"),
    Row(Check.ENVELOPE, None, NOTE, "wrong at other sizes of the problem (odd sizes, other batches)"),
    Row(Check.JAIL_HOME, None, None, "the jail covers kernelwright's home and the build cache",
        "no candidate reads another's builds or the store", "jail_hides_home", needs="root"),
    Row(Check.JAIL_BINDS, None, None, "the jail's own /dev, private /tmp, /dev/shm and home folders, other scratch "
        "quotas hidden, read-only file systems", "the candidate writes only its own folder", "jail_binds",
        needs="root"),
    Row(Check.JAIL_UID, None, None, "the jailed process runs as an unprivileged user",
        "root-only files stay closed", "jail_uid", needs="root"),
    Row(Check.JAIL_ROOT, None, None, "the jailed process's file system is a root of its own holding only the system "
        "folders, the interpreter, its packages, the harness's code and its scratch folder",
        "no home folder, other repository, store, transcript or other build is in sight", "jail_root", needs="root"),
    Row(Check.FREEZE, None, None, "the candidate's process tree is frozen while the parent writes its inputs and "
        "reads its outputs, and while the other side is timed", "no untimed window with the inputs", "freeze",
        PARENT, "a writable cgroup freezer", "2.5-6.0x accepted with 20 ms batches, 1.0-1.9x with the default 5 ms"),
    Row(Check.PARENT_SLOTS, None, None, "the parent writes every call's inputs and reads its outputs, the children "
        "frozen", "no harness code the parent trusts runs in the candidate's process", "parent_slots", PARENT,
        measured="4.0x child-staged; protocol_statement proves the fallback says so"),
    Row(Check.FRESH_FACTOR, None, None, "every timed call's floats carry a fresh per-element factor",
        "every timed call needs its inputs read", "fresh_factor"),
    Row(Check.FRESH_INTEGERS, None, None, "every timed call's integer and boolean inputs are redrawn",
        "no cache keyed on integer inputs", "fresh_integers",
        measured="4.3-5.0x with the trials' integers reused"),
)
TAGGED: dict[Check, Row] = {row.tag: row for row in ROWS if row.tag is not Check.NONE}


def row(tag: Check) -> Row:
    return TAGGED[tag]


def verdict_under(tag: Check, level: Level) -> Verdict | None:
    """What a finding tagged `tag` decides under static-policy `level` (None: a note)."""
    levels = TAGGED[tag].levels
    return getattr(levels, level) if levels is not None else None


def gate_order() -> tuple[str, ...]:
    """The gates' names in decision order: each where the first row naming it stands."""
    return tuple(dict.fromkeys(r.gate for r in ROWS if r.gate is not None))


def switches() -> dict[str, str]:
    """Every test-only switch with what it turns off (harness/defences.py KNOWN)."""
    return {r.switch: r.doc for r in ROWS if r.switch is not None}


def by_switch(switch: str) -> Check:
    return next(r.tag for r in ROWS if r.switch == switch)
