"""The child process: builds and runs the untrusted candidate, reports raw facts, decides nothing.

Run as `python -m harness.child SCRATCH_DIR`. It reads the job, the candidate, the problem and the inputs from
the scratch folder, and writes outputs, timing samples and phase events back. The parent compares outputs
against the reference it computed itself and derives the verdict; a child that dies, hangs or lies about its
phase can at worst make its own candidate fail.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from harness import job as J
from harness.build_cache import BuildFailed, BuildRecorder, CachedBuilder
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


def run_correctness(model: Any, trials: list[dict[str, Any]], device: str) -> list[Any]:
    import torch

    outputs = []
    for index, trial in enumerate(trials):
        inputs = to_device(cloned(trial["inputs"]), device)
        try:
            with torch.no_grad():
                result = model(*inputs)
            _sync(device)
        except BaseException as exc:
            raise CandidateFailure(
                "runtime_error", f"ModelNew.forward raised on trial {index + 1}:\n" + _short_traceback(exc)) from None
        outputs.append(portable(result))
    return outputs


def _timed_call(timer: Any, model: Any, inputs: list[Any]) -> float:
    import torch

    with torch.no_grad():
        return timer.time(lambda: model(*inputs))


def run_timing(job: J.ChildJob, reference: Any, candidate: Any, trials: list[dict[str, Any]],
               events: EventLog) -> dict[str, list[float]]:
    """Interleaved timing: each round times both models on the same fresh input set, in alternating order."""
    import torch

    timer = make_timer(job.device)
    input_sets = [to_device(list(t["inputs"]), job.device) for t in trials]
    models: dict[str, Callable[..., Any]] = {"ref": reference, "candidate": candidate}
    for _ in range(job.warmup_calls):
        for model in models.values():
            with torch.no_grad():
                model(*input_sets[0])
    _sync(job.device)
    probe = {name: _timed_call(timer, model, input_sets[0]) for name, model in models.items()}
    per_round_ms = max(sum(probe.values()), 1e-3)
    calls = int(job.timing_budget_s * 2000.0 / per_round_ms)
    calls = max(job.min_timed_calls, min(job.max_timed_calls, calls))
    events.write(phase="timing", calls=calls)
    samples: dict[str, list[float]] = {"ref": [], "candidate": []}
    for index in range(calls):
        order = ("ref", "candidate") if index % 2 == 0 else ("candidate", "ref")
        inputs = input_sets[index % len(input_sets)]
        for name in order:
            samples[name].append(_timed_call(timer, models[name], inputs))
    return samples


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

    builder = CachedBuilder(Path(job.build_cache), recorder,
                            extra_cuda_cflags=["-Xptxas", "-v"] if job.device == "cuda" else None)
    if job.device == "cuda-compile-only":
        from harness.cuda_compile import CompileOnlyBuilder

        builder = CompileOnlyBuilder(Path(job.build_cache), recorder, job.cuda_arch)
    builder.install()
    events.write(phase="import")
    candidate = _import_candidate(scratch, builder)
    if job.device == "cuda-compile-only":
        result["status"] = "compiled" if recorder.builds else "no_cuda_build"
        return
    events.write(phase="construct")
    problem = module_from_file(scratch / J.PROBLEM_FILE, "kernelwright_problem")
    payload = torch.load(scratch / J.INPUTS_FILE, weights_only=True)
    reference, new = _build_models(problem, candidate, payload["init_inputs"], job.init_seed, job.device)
    events.write(phase="correctness")
    outputs = run_correctness(new, payload["trials"], job.device)
    torch.save(outputs, scratch / J.OUTPUTS_FILE)
    if not job.skip_timing:
        try:
            result["timing"] = run_timing(job, reference, new, payload["trials"], events)
        except CandidateFailure:
            raise
        except BaseException as exc:
            raise CandidateFailure("runtime_error", "failed while being timed:\n" + _short_traceback(exc)) from None


def main() -> None:
    scratch = Path(sys.argv[1])
    result = run(scratch)
    _write_result(scratch, result)
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: nothing the candidate registered at exit runs after the report


if __name__ == "__main__":
    main()
