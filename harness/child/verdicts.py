"""Turn what happened to the child (exit, timeout, memory, reported status) into a verdict with reasons."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.child import job as J
from harness.isolation.sandbox import ChildOutcome, signal_name
from harness.policy import EvalPolicy
from harness.records import Check, Finding, Verdict
from harness.values.precision import settings_differences

_PHASE_WORDS = {"start": "starting up", "import": "importing/building the candidate",
                "construct": "constructing ModelNew", "correctness": "running the correctness trials",
                "timing": "being timed", "calls": "running the checked and timed calls"}
_STATUS_VERDICTS = {"compile_error": Verdict.COMPILE_ERROR, "runtime_error": Verdict.RUNTIME_ERROR,
                    "rejected": Verdict.REJECTED}


def read_events(scratch: Path) -> list[dict[str, Any]]:
    events = []
    try:
        lines = (scratch / J.EVENTS_FILE).read_text().splitlines()
    except OSError:
        return events
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def _last_phase(events: list[dict[str, Any]]) -> str:
    phases = [e.get("phase") for e in events if e.get("phase") in _PHASE_WORDS]
    return _PHASE_WORDS.get(phases[-1], "starting up") if phases else "starting up"


def log_tail(scratch: Path, chars: int = 3000) -> str:
    try:
        return (scratch / J.LOG_FILE).read_text(errors="replace")[-chars:].strip()
    except OSError:
        return ""


def child_failure(outcome: ChildOutcome, result: J.ChildResult | None, events: list[dict[str, Any]],
                  tail: str, policy: EvalPolicy, phase: str | None = None) -> list[Finding]:
    """What decides when the child did not finish cleanly or reported a failure (the first finding carries the
    verdict); empty when it did finish. `tail`: the end of its log; `phase`: what the parent knows it was doing
    (the child's calls all look alike to the child itself)."""
    where = _PHASE_WORDS[phase] if phase in _PHASE_WORDS else _last_phase(events)
    if outcome.timed_out:
        return [_decides(Verdict.TIMEOUT, f"timed out after {policy.timeout_s:g} s while {where}; the whole "
                         "process tree was killed")]
    if outcome.memory_exceeded:
        return [_decides(Verdict.CRASH, f"exceeded the memory limit of {policy.memory_limit_mb} MB while {where} "
                         f"(peak {outcome.peak_rss_mb:.0f} MB); the process tree was killed")]
    if result is None:
        died = _decides(Verdict.CRASH, f"the candidate's process died ({signal_name(outcome.returncode)}) while {where}")
        return [died] + ([_decides(Verdict.CRASH, f"last output:\n{tail}")] if tail else [])
    status = result.status
    if status in _STATUS_VERDICTS:
        return [_decides(_STATUS_VERDICTS[status], result.message.strip())]
    if status == "no_cuda_build":
        return [_decides(Verdict.REJECTED, NO_CUDA_SOURCES)]
    if status not in ("ok", "compiled"):
        return [_decides(Verdict.CRASH, f"the candidate's process reported an unknown status {status!r}")]
    return []


NO_CUDA_SOURCES = "compile-only CUDA device: the candidate built no CUDA sources"


def _decides(verdict: Verdict, message: str) -> Finding:
    return Finding(Check.NONE, message, verdict=verdict)


def _thread_findings(threads: dict[str, dict[str, int]], device: str | None) -> list[str]:
    start, checked, timed = threads.get("start"), threads.get("after_correctness"), threads.get("after_timing")
    findings = []
    if device == "cpu" and start and checked and checked["os_threads"] - start["os_threads"] > \
            max(start["torch_threads"] - 1, 0):  # an OpenMP pool of the thread budget is the kernel's right
        findings.append(f"threads: the candidate's process went from {start['os_threads']} OS threads before it "
                        f"was imported to {checked['os_threads']} after its checked calls, more than an OpenMP pool "
                        f"of its {start['torch_threads']}-thread budget: a thread started at import or by a call "
                        "is still running")
    for state in (s for s in (checked, timed) if s and start):
        if state["torch_threads"] != start["torch_threads"]:
            findings.append(f"threads: the candidate changed torch's thread count from {start['torch_threads']} "
                            f"to {state['torch_threads']} (more cores than the reference gets)")
            break
    for state in (s for s in (checked, timed) if s and start):
        if state["python_threads"] > start["python_threads"]:
            findings.append(f"threads: {state['python_threads'] - start['python_threads']} Python thread(s) the "
                            "candidate started are still running")
            break
    pool = start["os_threads"] + max(start["torch_threads"] - 1, 0) if start else 0  # an OpenMP pool may start on
    if checked and timed and timed["os_threads"] > max(checked["os_threads"], pool):  # any call, a timed one too
        findings.append(f"threads: OS threads grew from {checked['os_threads']} to {timed['os_threads']} while "
                        "being timed (work that outlives the call)")
    return findings


_MOMENTS = {"start": "before it was imported", "loaded": "once loaded",
            "after_correctness": "after its checked calls", "after_timing": "after its timed calls"}


def precision_findings(snapshots: dict[str, dict[str, str]], reference: dict[str, str] | None) -> list[str]:
    """The candidate changed its process's precision settings (TF32, reduced-precision reductions, the float32
    matmul precision...) after it started: the first moment they differ, and how. Or its process started with
    other settings than the reference was computed with (the harness's processes disagree: no speedup is reported
    under unequal settings either way)."""
    start = snapshots.get("start")
    started_apart = settings_differences(reference, start)
    if started_apart:
        return [f"precision-settings: the candidate's process started with other precision settings than the reference was "
                f"computed with ({'; '.join(started_apart)}): the harness's processes disagree, so nothing is "
                "compared or timed under unequal settings"]
    for moment, settings in snapshots.items():
        differences = settings_differences(start, settings)
        if differences:
            return [f"precision-settings: the candidate changed its process's precision settings, read {_MOMENTS.get(moment, moment)} "
                    f"({'; '.join(differences)}): the reference computes and is timed without them"]
    return []


def integrity_failures(result: J.ChildResult, reference: Any, policy: EvalPolicy,
                       device: str | None = None) -> list[Finding]:
    """Integrity violations observed in the child (each rejects). `device`: where OS threads since import are
    judged (the CPU; a GPU driver starts its own)."""
    if not policy.hardening:
        return []
    observed = (list(dict.fromkeys(result.integrity)) + _thread_findings(result.threads, device)
                + precision_findings(result.precision, getattr(reference, "settings", None)))
    if reference.mutates_inputs:  # the reference writes into its inputs too: not the candidate's trick
        observed = [o for o in observed if not o.startswith("mutation:")]
    return [_reported(text) for text in observed]


def _reported(text: str) -> Finding:
    """`tag: message`, as the child wrote it; a tag outside the vocabulary keeps its text whole."""
    tag, _, message = text.partition(":")
    check = Check.read(tag)
    return Finding(check, message.strip() if check or tag == "" else text, verdict=Verdict.REJECTED)
