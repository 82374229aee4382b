"""The child process: builds and runs the untrusted candidate, reports raw facts, decides nothing.

Run as `python -m harness.child SCRATCH_DIR`. It reads the job, the candidate, the problem and the inputs from
the scratch folder, and writes outputs, timing samples and phase events back. The parent compares outputs
against the reference it computed itself and derives the verdict; a child that dies, hangs or lies about its
phase can at worst make its own candidate fail.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import traceback
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable

from harness import job as J
from harness.build_cache import BuildFailed, BuildRecorder, CachedBuilder, remove_stale_builds
from harness.integrity import (PoisonedAllocations, flatten, identity_snapshot, inputs_changed, output_problems,
                               replaced_since, settled_fingerprints, thread_state)
from harness.tensors import cloned, portable, to_device
from harness.timing import make_timer

_perf_counter = time.perf_counter  # bound before any candidate code runs


class EventLog:
    """Append-only phase markers, flushed at once so the parent sees where a dead child stopped."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "a", buffering=1)

    def write(self, **event: Any) -> None:
        event["t"] = _perf_counter()
        self.file.write(json.dumps(event) + "\n")
        self.file.flush()


class CandidateFailure(Exception):
    """A failure of the candidate, classified for the parent."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _short_traceback(exc: BaseException, limit: int = 6) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-limit)
    return "".join(lines)[-4000:]


def _describe_device(device: str, threads: int) -> dict[str, Any]:
    import platform

    import torch

    info: dict[str, Any] = {"torch": torch.__version__, "python": platform.python_version(),
                            "platform": platform.platform()}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, sm=f"{props.major}.{props.minor}", cuda=torch.version.cuda,
                    gpu_memory_gb=round(props.total_memory / 2**30, 1), driver=_nvidia_driver())
    else:
        info.update(cpu=_cpu_model(), threads=threads, cpu_count=os.cpu_count())
    return info


def _nvidia_driver() -> str | None:
    try:
        first = Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    words = [w for w in first.split() if w[:1].isdigit() and "." in w]
    return words[0] if words else first.strip()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def _network_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return None


def _import_candidate(scratch: Path, builder: CachedBuilder) -> Any:
    from harness.modules import module_from_file

    try:
        module = module_from_file(scratch / J.CANDIDATE_FILE, "kernelwright_candidate")
    except BuildFailed as exc:
        raise CandidateFailure("compile_error", str(exc)) from None
    except SyntaxError as exc:
        raise CandidateFailure("compile_error", f"Python syntax error: {exc}") from None
    except BaseException as exc:  # anything the candidate's module body raises
        raise CandidateFailure("runtime_error", "importing the candidate failed:\n" + _short_traceback(exc)) from None
    if not hasattr(module, "ModelNew"):
        raise CandidateFailure("rejected", "the candidate module defines no `ModelNew`")
    return module


def _build_models(problem: Any, candidate: Any, init_inputs: list[Any], seed: int, device: str) -> tuple[Any, Any]:
    import torch

    torch.manual_seed(seed)
    reference = problem.Model(*init_inputs)
    torch.manual_seed(seed)
    try:
        new = candidate.ModelNew(*init_inputs)
    except BaseException as exc:
        raise CandidateFailure("runtime_error", "ModelNew(*get_init_inputs()) raised:\n" + _short_traceback(exc)) from None
    if not isinstance(new, torch.nn.Module):
        raise CandidateFailure("rejected", f"ModelNew(...) is a {type(new).__name__}, not a torch.nn.Module")
    return reference.to(device), new.to(device)


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _call(model: Any, inputs: list[Any]) -> Any:
    import torch

    with torch.no_grad():
        return model(*inputs)


def _check_call(job: J.ChildJob, model: Any, result: Any, pristine: list[Any], used: list[Any],
                earlier: list[Any], integrity: list[str]) -> None:
    first, settled = settled_fingerprints(result, job.device)
    if first != settled:
        integrity.append("work-after-return: the output kept changing after forward() returned (work on another "
                         "thread or stream finished later)")
    changed = inputs_changed(pristine, used)
    if changed:
        integrity.append(f"mutation: forward() modified input(s) {changed} in place")
    integrity.extend(output_problems(result, job.device, used, model, earlier))
    earlier.extend(t for t in flatten(result) if t is not None)


def run_correctness(job: J.ChildJob, model: Any, reference: Any, trials: list[dict[str, Any]],
                    integrity: list[str]) -> list[list[Any]]:
    """Per trial: the candidate's output before and (hardened) after the reference ran on the same inputs, on
    fresh copies of the inputs, into poisoned memory."""
    outputs: list[list[Any]] = []
    earlier: list[Any] = []  # kept alive so a later output cannot legitimately land in the same memory
    for index, trial in enumerate(trials):
        pristine = to_device(cloned(trial["inputs"]), job.device)
        per_trial = []
        for position in ("before", "after") if job.hardening else ("only",):
            if position == "after":
                _call(reference, to_device(cloned(trial["inputs"]), job.device))  # leaves its memory behind
                _sync(job.device)
            inputs = to_device(cloned(trial["inputs"]), job.device)
            try:
                with PoisonedAllocations() if job.hardening else nullcontext():
                    result = _call(model, inputs)
                    _sync(job.device)
            except BaseException as exc:
                raise CandidateFailure("runtime_error", f"ModelNew.forward raised on trial {index + 1}:\n"
                                       + _short_traceback(exc)) from None
            if job.hardening:
                _check_call(job, model, result, pristine, inputs, earlier, integrity)
            per_trial.append(portable(result))
        outputs.append(per_trial)
    return outputs


def run_timing(job: J.ChildJob, reference: Any, candidate: Any, trials: list[dict[str, Any]],
               events: EventLog) -> tuple[dict[str, list[float]], list[dict[str, Any]]]:
    """Interleaved timing: each round times both models, in alternating order, on freshly allocated copies of
    an input set drawn at random (by a seed the candidate never sees). At secret positions the candidate's
    output is kept for the parent to check, so timed calls cannot behave differently from checked ones."""
    timer = make_timer(job.device)
    rng = random.Random(job.timing_seed)
    models: dict[str, Callable[..., Any]] = {"ref": reference, "candidate": candidate}
    first_set = to_device(cloned(trials[0]["inputs"]), job.device)
    for _ in range(job.warmup_calls):
        for model in models.values():
            _call(model, first_set)
    _sync(job.device)
    probe = {name: timer.time(lambda m=model: _call(m, first_set))[0] for name, model in models.items()}
    per_round_ms = max(sum(probe.values()), 1e-3)
    calls = max(job.min_timed_calls, min(job.max_timed_calls, int(job.timing_budget_s * 2000.0 / per_round_ms)))
    spot_positions = set(rng.sample(range(calls), min(job.spot_checks, calls))) if job.hardening else set()
    events.write(phase="timing", calls=calls)
    samples: dict[str, list[float]] = {"ref": [], "candidate": []}
    spot_checks: list[dict[str, Any]] = []
    held: list[Any] = []  # the previous round's inputs stay alive: a new round never gets their addresses
    for index in range(calls):
        set_index = rng.randrange(len(trials)) if job.hardening else index % len(trials)
        fresh = {name: to_device(cloned(trials[set_index]["inputs"]), job.device) for name in models}
        order = ("ref", "candidate") if index % 2 == 0 else ("candidate", "ref")
        for name in order:
            elapsed, output = timer.time(lambda n=name: _call(models[n], fresh[n]))
            samples[name].append(elapsed)
            if name == "candidate" and index in spot_positions:
                spot_checks.append({"call": index, "trial": set_index, "output": portable(output)})
        held = [fresh]
    del held
    return samples, spot_checks


def run_baselines(job: J.ChildJob, problem: Any, payload: dict[str, Any]) -> dict[str, Any]:
    """The reference timed eagerly, then compiled with torch.compile (compile time excluded by warm-up)."""
    import torch

    torch.manual_seed(job.init_seed)
    model = problem.Model(*payload["init_inputs"]).to(job.device)
    inputs = to_device(cloned(payload["trials"][0]["inputs"]), job.device)
    timer = make_timer(job.device)
    measured: dict[str, Any] = {}
    for name, build in (("eager", lambda: model), ("compile", lambda: torch.compile(model))):
        try:
            runnable = build()
            for _ in range(job.warmup_calls):
                _call(runnable, inputs)
            _sync(job.device)
            probe = timer.time(lambda: _call(runnable, inputs))[0]
            calls = max(job.min_timed_calls, min(job.max_timed_calls, int(job.timing_budget_s * 1000 / max(probe, 1e-3))))
            measured[name] = [timer.time(lambda: _call(runnable, inputs))[0] for _ in range(calls)]
        except Exception as exc:  # torch.compile fails on some problems and machines: a recorded reason
            measured[f"{name}_error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
    return measured


def _write_result(scratch: Path, result: dict[str, Any]) -> None:
    temporary = scratch / (J.RESULT_FILE + ".tmp")
    temporary.write_text(json.dumps(result, default=str))
    os.replace(temporary, scratch / J.RESULT_FILE)


def run(scratch: Path) -> dict[str, Any]:
    job = J.ChildJob.model_validate_json((scratch / J.JOB_FILE).read_text())
    events = EventLog(scratch / J.EVENTS_FILE)
    events.write(phase="start", netns=_network_namespace())
    import torch

    if job.device == "cpu":
        torch.set_num_threads(job.cpu_threads)
    recorder = BuildRecorder()
    result: dict[str, Any] = {"status": "ok", "builds": recorder.builds,
                              "device_info": _describe_device(job.device, job.cpu_threads)}
    try:
        _run_stages(job, scratch, events, recorder, result)
    except CandidateFailure as failure:
        result.update(status=failure.kind, message=str(failure))
    events.write(phase="done", status=result["status"])
    return result


def _run_stages(job: J.ChildJob, scratch: Path, events: EventLog, recorder: BuildRecorder,
                result: dict[str, Any]) -> None:
    import torch

    from harness.modules import module_from_file

    integrity: list[str] = []
    result["integrity"] = integrity
    builder = CachedBuilder(Path(job.build_cache), recorder,
                            extra_cuda_cflags=["-Xptxas", "-v"] if job.device == "cuda" else None)
    if job.device == "cuda-compile-only":
        from harness.cuda_compile import CompileOnlyBuilder

        builder = CompileOnlyBuilder(Path(job.build_cache), recorder, job.cuda_arch)
    builder.install()
    remove_stale_builds(Path(job.build_cache))  # unfinished folders of builds killed hours ago
    problem = module_from_file(scratch / J.PROBLEM_FILE, "kernelwright_problem")  # before any candidate code
    if job.baseline:
        result["baseline"] = run_baselines(job, problem, torch.load(scratch / J.INPUTS_FILE, weights_only=True))
        return
    with PoisonedAllocations():  # its lazy imports rebind torch attributes: let that happen before the snapshot
        pass
    identities = identity_snapshot()
    threads: dict[str, dict[str, int]] = {"start": thread_state()}
    result["threads"] = threads
    events.write(phase="import")
    candidate = _import_candidate(scratch, builder)
    _note_replacements(identities, integrity, "importing the candidate")
    _add_instruction_mix(recorder)
    if job.device == "cuda-compile-only":
        result["status"] = "compiled" if recorder.builds else "no_cuda_build"
        return
    if job.build_only:
        return
    events.write(phase="construct")
    payload = torch.load(scratch / J.INPUTS_FILE, weights_only=True)
    reference, new = _build_models(problem, candidate, payload["init_inputs"], job.init_seed, job.device)
    events.write(phase="correctness")
    outputs = run_correctness(job, new, reference, payload["trials"], integrity)
    threads["after_correctness"] = thread_state()
    _note_replacements(identities, integrity, "the correctness calls")
    torch.save(outputs, scratch / J.OUTPUTS_FILE)
    if job.skip_timing:
        return
    if job.device == "cuda":
        from harness.nvml import snapshot

        result["telemetry"] = {"before": snapshot()}
    try:
        result["timing"], spot_checks = run_timing(job, reference, new, payload["trials"], events)
    except CandidateFailure:
        raise
    except BaseException as exc:
        raise CandidateFailure("runtime_error", "failed while being timed:\n" + _short_traceback(exc)) from None
    threads["after_timing"] = thread_state()
    if job.device == "cuda":
        result["telemetry"]["after"] = snapshot()
    _note_replacements(identities, integrity, "the timed calls")
    torch.save(spot_checks, scratch / J.SPOT_CHECKS_FILE)


def _add_instruction_mix(recorder: BuildRecorder) -> None:
    from harness.sass import sass_mix

    for build in recorder.builds:
        if build.get("cuda") and build.get("binary") and Path(build["binary"]).exists():
            build["sass"] = sass_mix(Path(build["binary"]))


def _note_replacements(identities: dict[str, int], integrity: list[str], during: str) -> None:
    replaced = replaced_since(identities)
    if replaced:
        integrity.append(f"monkeypatch: {', '.join(replaced[:8])} replaced during {during}")
        identities.update(identity_snapshot())  # report each replacement once


def main() -> None:
    scratch = Path(sys.argv[1])
    result = run(scratch)
    _write_result(scratch, result)
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: nothing the candidate registered at exit runs after the report


if __name__ == "__main__":
    main()
