"""The child's `load` command: import the candidate and construct ModelNew as the parent seeds the reference (the
reference's child constructs the problem's Model instead and never loads candidate code; with `compile`, that Model
wrapped in torch.compile and compiled before any timed call: the compiled baseline, harness/execution/baseline.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.child import job as J
from harness.child.calls import bind_device_sync, call, sync
from harness.child.process import CandidateFailure, note_replacements, short_traceback
from harness.compilation.build_cache import BuildFailed
from harness.isolation import protocol as P
from harness.values.integrity import identity_snapshot, thread_state
from harness.values.parameters import assign
from harness.values.precision import precision_settings


def import_candidate(scratch: Path) -> Any:
    from harness.values.modules import module_from_file

    try:
        module = module_from_file(scratch / J.CANDIDATE_FILE, "kernelwright_candidate")
    except BuildFailed as exc:
        raise CandidateFailure("compile_error", str(exc)) from None
    except SyntaxError as exc:
        raise CandidateFailure("compile_error", f"Python syntax error: {exc}") from None
    except BaseException as exc:  # anything the candidate's module body raises
        raise CandidateFailure("runtime_error", "importing the candidate failed:\n" + short_traceback(exc)) from None
    if not hasattr(module, "ModelNew"):
        raise CandidateFailure("rejected", "the candidate module defines no `ModelNew`")
    return module


def build_model(candidate: Any, init_inputs: list[Any], seed: int, device: str) -> Any:
    """ModelNew, seeded as the parent seeds the reference (the problem's Model is never built in this process)."""
    import torch

    torch.manual_seed(seed)
    try:
        new = candidate.ModelNew(*init_inputs)
    except BaseException as exc:
        raise CandidateFailure("runtime_error", "ModelNew(*get_init_inputs()) raised:\n" + short_traceback(exc)) from None
    if not isinstance(new, torch.nn.Module):
        raise CandidateFailure("rejected", f"ModelNew(...) is a {type(new).__name__}, not a torch.nn.Module")
    return new.to(device)


def warm_inputs(payload: dict[str, Any], device: str) -> list[Any]:
    """One call's inputs, shaped as every timed call's: the first trial's where the child has them, else made from
    the template's shapes and dtypes (where the parent writes every input, the child's file holds only those)."""
    import torch

    from harness.values.tensors import to_device

    if payload.get("trials"):
        return to_device(payload["trials"][0]["inputs"], device)
    made = []
    for value in payload.get("template") or []:
        if not isinstance(value, torch.Tensor):
            made.append(value)
        elif value.dtype.is_floating_point or value.dtype.is_complex:
            made.append(torch.randn(value.shape, dtype=value.dtype, device=device))
        else:
            made.append(torch.zeros(value.shape, dtype=value.dtype, device=device))
    return made


def compiled_reference(model: Any, inputs: list[Any], calls: int, device: str, mode: str | None = None) -> Any:
    """`model` wrapped in torch.compile and called `calls` times (at least twice): the first call compiles, so none of
    the compiling lands on the parent's clock. Where torch.compile fails (it does on some problems and machines),
    a `compile_error` naming its error."""
    import torch

    try:
        compiled = torch.compile(model, mode=mode) if mode else torch.compile(model)
        for _ in range(max(calls, 2)):
            call(compiled, inputs)
        sync(device)
    except Exception as exc:  # a recorded reason, never a crash
        raise CandidateFailure("compile_error", f"torch.compile failed: {type(exc).__name__}: {str(exc)[:2000]}") \
            from None
    return compiled


class Loading:
    """`load` (a handler of harness/child/main.py's Child)."""

    def do_load(self, command: P.Load) -> P.Status:
        import torch

        bind_device_sync(self.job.device)
        from harness.child.census import prepare

        prepare()
        self.identities = identity_snapshot()
        self.threads: dict[str, dict[str, int]] = {"start": thread_state()}
        self.result.threads = self.threads
        self.settings: dict[str, dict[str, str]] = {"start": precision_settings()}
        self.result.precision = self.settings
        if (self.scratch / J.INPUTS_FILE).exists():
            self.payload = torch.load(self.scratch / J.INPUTS_FILE, weights_only=True)
        init_inputs = self.payload.get("init_inputs")
        if self.role == "reference":
            torch.manual_seed(self.job.init_seed)
            self.model = self.problem.Model(*init_inputs).to(self.job.device)
            assign(self.model, self.payload.get("parameters") or {})
            if command.compile:
                self.model = compiled_reference(self.model, warm_inputs(self.payload, self.job.device),
                                                self.job.policy.warmup_calls, self.job.device, command.mode)
            return P.Status(settings=self._loaded())
        if command.compile:
            raise CandidateFailure("crash", "`load` with compile is for the reference's process only")
        self.events.write(phase="import")
        candidate = import_candidate(self.scratch)
        note_replacements(self.identities, self.integrity, "importing the candidate")
        if self.job.device == "cuda-compile-only":
            return self._compiled(candidate)
        self.events.write(phase="construct")
        self.model = build_model(candidate, init_inputs, self.job.init_seed, self.job.device)
        try:  # (a candidate holding them nowhere keeps its own)
            assign(self.model, self.payload.get("parameters") or {})
        except Exception as exc:  # its own parameters' code raised
            raise CandidateFailure("runtime_error", "setting the redrawn parameters in ModelNew raised:\n"
                                   + short_traceback(exc)) from None
        return P.Status(settings=self._loaded())

    def _loaded(self) -> dict[str, str]:
        self.settings["loaded"] = precision_settings()
        return self.settings["loaded"]

    def _compiled(self, candidate: Any) -> P.Status:
        """Compile-only: construct ModelNew too (kernels built in __init__), on the CPU, with the problem's inputs."""
        import torch

        try:
            torch.manual_seed(self.job.init_seed)
            candidate.ModelNew(*self.problem.get_init_inputs())
        except BuildFailed as exc:
            raise CandidateFailure("compile_error", str(exc)) from None
        except Exception:  # it may need a GPU to construct: what it built so far is what we judge
            pass
        self.result.status = "compiled" if self.builder.builds else "no_cuda_build"
        return P.Status(self.result.status)
