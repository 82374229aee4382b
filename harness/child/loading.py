"""The child's `load` command: import the candidate and construct ModelNew as the parent seeds the reference (the
reference's child constructs the problem's Model instead and never loads candidate code)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.child import job as J
from harness.child.calls import bind_device_sync
from harness.child.process import CandidateFailure, note_replacements, short_traceback
from harness.compilation.build_cache import BuildFailed
from harness.isolation import protocol as P
from harness.values.integrity import identity_snapshot, thread_state


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
        if (self.scratch / J.INPUTS_FILE).exists():
            self.payload = torch.load(self.scratch / J.INPUTS_FILE, weights_only=True)
        init_inputs = self.payload.get("init_inputs")
        if self.role == "reference":
            torch.manual_seed(self.job.init_seed)
            self.model = self.problem.Model(*init_inputs).to(self.job.device)
            return P.Status()
        self.events.write(phase="import")
        candidate = import_candidate(self.scratch)
        note_replacements(self.identities, self.integrity, "importing the candidate")
        if self.job.device == "cuda-compile-only":
            return self._compiled(candidate)
        self.events.write(phase="construct")
        self.model = build_model(candidate, init_inputs, self.job.init_seed, self.job.device)
        return P.Status()

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
