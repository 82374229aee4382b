"""Which harness judged an evaluation: the checks' version, a digest of the check list and the policy that decided.

A stored reward outlives the harness that produced it: each round of hardening finds exploits an earlier harness
accepted. The version lets a row judged before a hole was closed be told from one judged after, and lets
`kernelwright rescore` pick the rows an older harness judged. It is computed from *what decides*, not from the
code's bytes, so a refactor, a comment or a new CLI option leaves it alone:

- the registry's rows (harness/checks.py ROWS), in the order they decide: each check's tag, its gate, what it
  decides under each static-policy level, its test-only switch and the protocol paths it holds on (not its prose:
  a reworded doc line leaves the version alone);
- CHECKS_REVISION, bumped by hand when a check changes what it accepts under the same row (a hole closed inside
  a measurement, a tolerance);
- the policy's judging fields (every field but the resource knobs in RESOURCE_FIELDS: how long to measure or how
  much memory to give changes the precision of a number, not which checks ran).

This module is the one place the version is computed; everything else reads `checks_version(policy)`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from harness.policy import EvalPolicy

CHECKS_REVISION = 3  # bump when a check changes what it accepts without its registry row changing
UNVERSIONED = "unversioned"  # what an evaluation stored before versions says
RESOURCE_FIELDS = frozenset({
    "warmup_calls", "min_timed_calls", "max_timed_calls", "timing_budget_s", "timing_precision", "timeout_s",
    "build_timeout_s", "max_builds", "build_budget_s", "scratch_limit_mb", "memory_limit_mb", "cuda_arch",
    "batch_target_ms"})


def check_list() -> list[list[Any]]:
    """The registry's rows, in decision order, as what decides: tag, gate, verdict per level, switch, paths."""
    from harness.checks import ROWS

    return [[row.tag.value, row.gate, None if row.levels is None else [_value(v) for v in row.levels], row.switch,
             list(row.paths)] for row in ROWS]


def _value(verdict: Any) -> str | None:
    return None if verdict is None else str(getattr(verdict, "value", verdict))


def judging_policy(policy: EvalPolicy | dict[str, Any] | None) -> dict[str, Any]:
    """The policy's fields that change which checks run or what they accept."""
    data = policy if isinstance(policy, dict) else (policy or EvalPolicy()).model_dump(mode="json")
    return {key: value for key, value in data.items() if key not in RESOURCE_FIELDS}


def checks_version(policy: EvalPolicy | dict[str, Any] | None = None) -> str:
    """`checks-` and 12 hex digits: the digest of the check list, CHECKS_REVISION and the judging policy."""
    what = {"checks": check_list(), "revision": CHECKS_REVISION, "policy": judging_policy(policy)}
    digest = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()
    return f"checks-{digest[:12]}"
