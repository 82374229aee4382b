"""The child's `baseline` command (a baseline job, no candidate): the reference timed eagerly and compiled with
torch.compile, on this process's own clock (harness/execution/baseline.py reads the samples)."""

from __future__ import annotations

from typing import Any

from harness.child import job as J
from harness.child.calls import call, sync
from harness.isolation import protocol as P
from harness.measurement.timing import make_timer
from harness.values.tensors import cloned, to_device


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
            for _ in range(job.policy.warmup_calls):
                call(runnable, inputs)
            sync(job.device)
            probe = timer.time(lambda: call(runnable, inputs))[0]
            policy = job.policy
            calls = max(policy.min_timed_calls, min(policy.max_timed_calls, int(policy.timing_budget_s * 1000 / max(probe, 1e-3))))
            measured[name] = [timer.time(lambda: call(runnable, inputs))[0] for _ in range(calls)]
        except Exception as exc:  # torch.compile fails on some problems and machines: a recorded reason
            measured[f"{name}_error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
    return measured


class Baselines:
    """`baseline` (a handler of harness/child/main.py's Child)."""

    def do_baseline(self, command: P.Baseline) -> P.BaselineTimes:
        import torch

        payload = torch.load(self.scratch / J.INPUTS_FILE, weights_only=True)
        return P.BaselineTimes(run_baselines(self.job, self.problem, payload))
