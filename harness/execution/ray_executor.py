"""A Ray executor for the agent and sweeps beyond one machine: build tasks on CPU resources, evaluation tasks on a timing
resource (one GPU, or the `kernelwright_timing` slot on a CPU node), retried on worker loss. Tasks only
*return* evaluations; the driver is the only writer to the store.

A local cluster binds to 127.0.0.1 only. To join an existing cluster, start its nodes with
`ray start ... --resources '{"kernelwright_timing": 1}'` and pass `--ray-address`.
"""

from __future__ import annotations

import os
from concurrent.futures import Future
from typing import Any

from harness.execution.eval_task import EvalTask, ExecutorUnavailable
from harness.records import Evaluation

TIMING_RESOURCE = "kernelwright_timing"
_PASSED_ENV = ("KERNELWRIGHT_HOME", "KERNELWRIGHT_BUILD_CACHE", "KERNELWRIGHT_KEEP_SCRATCH", "PATH")


class RayUnavailable(ExecutorUnavailable):
    """Ray is missing or the cluster cannot run kernelwright's tasks; the message says what to do."""


def _build(task: EvalTask) -> dict[str, object]:
    from harness.execution.prebuild import prebuild

    return prebuild(task.problem, task.source, task.device, task.policy)


def _evaluate(task: EvalTask, built: dict[str, Any]) -> Evaluation:
    from harness.pipeline import evaluate
    from harness.execution.eval_task import with_prebuild

    import ray

    node = ray.get_runtime_context().get_node_id()
    return with_prebuild(evaluate(task.problem, task.source, task.device, task.policy), built,
                         {"kind": "ray", "node": node})


def _profile(task: EvalTask, kernels: list[str]) -> dict[str, Any]:
    from harness.execution.eval_task import run_profile

    return run_profile(task, kernels)


class RayExecutor:
    def __init__(self, address: str | None = None, device: str = "cpu", workers: int | None = None,
                 retries: int = 2) -> None:
        try:
            import ray
        except ImportError:
            raise RayUnavailable("the ray executor needs Ray: pip install 'ray[default]'") from None
        self.ray = ray
        self.started_cluster = not ray.is_initialized() and address is None
        env = {"env_vars": {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}}
        if not ray.is_initialized():
            if address:
                ray.init(address=address, runtime_env=env, log_to_driver=False)
            else:
                ray.init(_node_ip_address="127.0.0.1", include_dashboard=False, num_cpus=workers or os.cpu_count(),
                         resources={TIMING_RESOURCE: 1}, runtime_env=env, log_to_driver=False)
        timing = {"num_gpus": 1} if device == "cuda" else {"resources": {TIMING_RESOURCE: 1}}
        if device != "cuda" and not ray.cluster_resources().get(TIMING_RESOURCE):
            raise RayUnavailable(f"no node offers the '{TIMING_RESOURCE}' resource: start CPU nodes with "
                                 f"--resources '{{\"{TIMING_RESOURCE}\": 1}}'")
        self.build = ray.remote(num_cpus=1, max_retries=retries)(_build)
        self.evaluate = ray.remote(num_cpus=0, max_retries=retries, **timing)(_evaluate)
        self.profiler = ray.remote(num_cpus=0, max_retries=retries, **timing)(_profile)

    def submit(self, task: EvalTask) -> "Future[Evaluation]":
        built = self.build.remote(task)
        return self.evaluate.remote(task, built).future()

    def profile(self, task: EvalTask, kernels: list[str]) -> "Future[dict[str, Any]]":
        return self.profiler.remote(task, kernels).future()

    def shutdown(self) -> None:
        if self.started_cluster:
            self.ray.shutdown()

    def describe(self) -> dict[str, Any]:
        return {"resources": self.ray.cluster_resources()}
