"""Training data from evaluated candidates (rows from store.export_rows), as pure functions.

- sft: per problem, among accepted kernels at the top speedup (within 2%), the one with the shortest rationale
  (ConCuR's curation): prompt, rationale (the judge's advice it followed and the coder's prose), kernel.
- rl: every candidate that has a prompt: prompt, completion, reward (rewards.reward), verdict.
- rl: every candidate that has a prompt: prompt, completion, reward (rewards.reward, under the definition named
  in `reward_definition`), verdict.
- preference: per problem, (chosen, rejected) pairs: chosen accepted and at least 10% faster than an accepted
  rejected (and, where both have intervals, the two intervals apart: noise chooses nothing), or any accepted
  kernel against one that was not accepted. DPO needs both answers to one prompt:
  pairs written from the same prompt (best-of-N slots of a round) have `shared_prompt` true and come first;
  other pairs carry the rejected kernel's own prompt in `rejected_prompt` (filter on `shared_prompt` for DPO).
- pairs: per problem and device, slow-fast pairs of accepted kernels for contrastive training (AccelOpt's memory):
  the fast one at least 10% faster than the slow one and, where both have intervals, the two intervals apart.
Rows are de-duplicated by kernel first (one row per problem and source hash: the most recently judged). Every
record carries the problem fingerprint (for contamination checks), the device, the verdict, `shrunk` (the size
changes when the speedup was measured on a problem rescaled to the CPU budget, else null) and `judge` (the checks'
version, protocol path, device and policy that judged it); nothing not accepted is ever chosen or carries a
positive reward. `dataset_card` describes an export: counts by verdict and device, the checks' versions, the
reward definition, the policies and the problems.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, Iterable

from rewards.reward import ACCEPTED, DEFAULT_REWARD, reward, reward_function

_CODE = re.compile(r"```.*?```", re.DOTALL)
TOP_TOLERANCE = 0.98
PREFERENCE_MARGIN = 1.1


def _accepted(row: dict[str, Any]) -> bool:
    return row["verdict"] == ACCEPTED and row["speedup"] is not None


def _common(row: dict[str, Any]) -> dict[str, Any]:
    judge = row.get("judge") or {}
    return {"problem": row["problem_key"], "problem_fingerprint": row["problem_fingerprint"], "device": row["device"],
            "shrunk": row.get("shrunk"), "verdict": row["verdict"], "speedup": row["speedup"],
            "speedup_ci": row.get("speedup_ci"), "run_id": row["run_id"], "candidate_id": row["candidate_id"],
            "source_hash": row["source_hash"], "checks_version": judge.get("checks_version", "unversioned"),
            "judge": judge}


def _reward(row: dict[str, Any], definition: str) -> float:
    return reward(row["verdict"], row["speedup"], row.get("speedup_ci"), row.get("speedup_significant"), definition)


def _judged(row: dict[str, Any]) -> int:
    return (row.get("judge") or {}).get("evaluation_id") or 0


def dedupe(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per kernel (problem fingerprint and source hash, whichever run wrote it): the most recently judged,
    so a kernel re-judged in one run is not exported with the verdict it lost in another. First-seen order."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        key = (row["problem_fingerprint"], row["source_hash"])
        if key not in latest or _judged(row) > _judged(latest[key]):
            latest[key] = row
    kept = {id(row) for row in latest.values()}
    return [row for row in rows if id(row) in kept]


def rationale(row: dict[str, Any]) -> str:
    prose = _CODE.sub("", row.get("reply") or "").strip()
    return "\n\n".join(part for part in (row.get("judge_advice") or "", prose) if part)


def _unique(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, kept = set(), []
    for row in rows:
        if row["source_hash"] not in seen:
            seen.add(row["source_hash"])
            kept.append(row)
    return kept


def _significantly_faster(row: dict[str, Any]) -> bool:
    """Above 1.0x beyond the noise: the harness's judgement, else the interval (a record from before intervals
    were kept is taken at its point estimate)."""
    if row["speedup"] is None or row["speedup"] <= 1.0:
        return False
    if row.get("speedup_significant") is not None:
        return bool(row["speedup_significant"])
    interval = row.get("speedup_ci")
    return not interval or interval[0] > 1.0


def meets(row: dict[str, Any], min_speedup: float) -> bool:
    """An accepted kernel a dataset may hold up as a target: at least `min_speedup` and, from 1.0 up, also
    significantly faster than the reference (a kernel inside the noise is no speedup, whatever its point)."""
    return row["speedup"] is not None and row["speedup"] >= min_speedup and (
        min_speedup < 1.0 or _significantly_faster(row))


def _by_problem(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[row["problem_fingerprint"]].append(row)
    return grouped


def sft_records(rows: list[dict[str, Any]], min_speedup: float = 0.0) -> list[dict[str, Any]]:
    records = []
    for group in _by_problem([r for r in rows if _accepted(r) and r["prompt"] and meets(r, min_speedup)]).values():
        top = max(r["speedup"] for r in group)
        best = min((r for r in group if r["speedup"] >= TOP_TOLERANCE * top), key=lambda r: len(rationale(r)))
        records.append({**_common(best), "prompt": best["prompt"], "rationale": rationale(best),
                        "completion": best["source"]})
    return records


def rl_records(rows: list[dict[str, Any]], min_speedup: float = 0.0,
               reward_definition: str = DEFAULT_REWARD) -> list[dict[str, Any]]:
    reward_function(reward_definition)  # an unknown name fails before anything is built
    return [{**_common(r), "prompt": r["prompt"], "completion": r["reply"] or r["source"],
             "reward": _reward(r, reward_definition), "reward_definition": reward_definition, "reasons": r["reasons"]}
            for r in rows if r["prompt"] and (not _accepted(r) or r["speedup"] >= min_speedup)]


def preference_records(rows: list[dict[str, Any]], min_speedup: float = 0.0) -> list[dict[str, Any]]:
    records = []
    for group in _by_problem(_unique(r for r in rows if r["prompt"])).values():
        chosen_pool = [r for r in group if _accepted(r) and meets(r, min_speedup)]
        for chosen in chosen_pool:
            for other in group:
                better = (not _accepted(other)) or _apart(chosen, other)
                if other is chosen or not better:
                    continue
                records.append({**_common(chosen), "prompt": chosen["prompt"], "chosen": chosen["source"],
                                "rejected": other["source"], "chosen_speedup": chosen["speedup"],
                                "rejected_speedup": other["speedup"], "rejected_verdict": other["verdict"],
                                "rejected_prompt": other["prompt"], "shared_prompt": other["prompt"] == chosen["prompt"]})
    return sorted(records, key=lambda r: not r["shared_prompt"])


def _apart(fast: dict[str, Any], slow: dict[str, Any]) -> bool:
    """Fast is PREFERENCE_MARGIN faster than slow and, where both have intervals, they do not overlap."""
    if fast["speedup"] < PREFERENCE_MARGIN * slow["speedup"]:
        return False
    fast_ci, slow_ci = fast.get("speedup_ci"), slow.get("speedup_ci")
    return not (fast_ci and slow_ci) or fast_ci[0] > slow_ci[1]


def pair_records(rows: list[dict[str, Any]], min_speedup: float = 0.0) -> list[dict[str, Any]]:
    """Slow-fast pairs of accepted kernels of one problem on one device (fast at least `min_speedup`)."""
    records = []
    accepted = [r for r in rows if _accepted(r)]
    for group in _by_problem(accepted).values():
        for fast in (r for r in group if meets(r, min_speedup)):
            for slow in group:
                if slow is fast or slow["device"] != fast["device"] or not _apart(fast, slow):
                    continue
                records.append({**_common(fast), "prompt": fast["prompt"], "fast": fast["source"],
                                "slow": slow["source"], "fast_speedup": fast["speedup"],
                                "slow_speedup": slow["speedup"], "fast_speedup_ci": fast.get("speedup_ci"),
                                "slow_speedup_ci": slow.get("speedup_ci"), "slow_source_hash": slow["source_hash"],
                                "slow_judge": slow.get("judge") or {}})
    return records


BUILDERS = {"sft": sft_records, "rl": rl_records, "preference": preference_records, "pairs": pair_records}


def _counts(values: Iterable[Any]) -> dict[str, int]:
    counted: dict[str, int] = defaultdict(int)
    for value in values:
        counted[str(value)] += 1
    return dict(sorted(counted.items()))


def dataset_card(kind: str, rows: list[dict[str, Any]], records: list[dict[str, Any]], duplicates: int,
                 reward_definition: str | None = None, min_speedup: float = 0.0) -> dict[str, Any]:
    """What an export holds and who judged it: the rows it was built from (after de-duplication) counted by
    verdict, device, checks' version and policy; the reward definition (rl); the problems by fingerprint."""
    judges = [r.get("judge") or {} for r in rows]
    problems = {r["problem_fingerprint"]: r["problem_key"] for r in rows}
    return {"format": kind, "records": len(records), "rows": len(rows), "duplicates_dropped": duplicates,
            "min_speedup": min_speedup, "reward_definition": reward_definition,
            "reward_doc": (reward_function(reward_definition).__doc__ or "").strip() if reward_definition else None,
            "verdicts": _counts(r["verdict"] for r in rows), "devices": _counts(r["device"] for r in rows),
            "checks_versions": _counts(j.get("checks_version", "unversioned") for j in judges),
            "protocols": _counts(j.get("protocol") for j in judges),
            "policies": _counts(j.get("static_policy") for j in judges),
            "problems": [{"problem": key, "fingerprint": fingerprint}
                         for fingerprint, key in sorted(problems.items(), key=lambda item: item[1])]}
