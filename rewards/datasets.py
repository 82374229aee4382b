"""Training data from evaluated candidates (rows from store.export_rows), as pure functions.

- sft: per problem, among accepted kernels at the top speedup (within 2%), the one with the shortest rationale
  (ConCuR's curation): prompt, rationale (the judge's advice it followed and the coder's prose), kernel.
- rl: every candidate that has a prompt: prompt, completion, reward (rewards.reward), verdict.
- preference: per problem, (chosen, rejected) pairs: chosen accepted and at least 10% faster than an accepted
  rejected, or any accepted kernel against one that was not accepted. DPO needs both answers to one prompt:
  pairs written from the same prompt (best-of-N slots of a round) have `shared_prompt` true and come first;
  other pairs carry the rejected kernel's own prompt in `rejected_prompt` (filter on `shared_prompt` for DPO).
Every record carries the problem fingerprint, the device, the verdict and `shrunk` (the size changes when the
speedup was measured on a problem rescaled to the CPU budget, else null); nothing not accepted is ever chosen
or carries a positive reward.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, Iterable

from rewards.reward import ACCEPTED, reward

_CODE = re.compile(r"```.*?```", re.DOTALL)
TOP_TOLERANCE = 0.98
PREFERENCE_MARGIN = 1.1


def _accepted(row: dict[str, Any]) -> bool:
    return row["verdict"] == ACCEPTED and row["speedup"] is not None


def _common(row: dict[str, Any]) -> dict[str, Any]:
    return {"problem": row["problem_key"], "problem_fingerprint": row["problem_fingerprint"], "device": row["device"],
            "shrunk": row.get("shrunk"), "verdict": row["verdict"], "speedup": row["speedup"],
            "run_id": row["run_id"], "candidate_id": row["candidate_id"]}


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


def _by_problem(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[row["problem_fingerprint"]].append(row)
    return grouped


def sft_records(rows: list[dict[str, Any]], min_speedup: float = 0.0) -> list[dict[str, Any]]:
    records = []
    for group in _by_problem([r for r in rows if _accepted(r) and r["prompt"] and r["speedup"] >= min_speedup]).values():
        top = max(r["speedup"] for r in group)
        best = min((r for r in group if r["speedup"] >= TOP_TOLERANCE * top), key=lambda r: len(rationale(r)))
        records.append({**_common(best), "prompt": best["prompt"], "rationale": rationale(best),
                        "completion": best["source"]})
    return records


def rl_records(rows: list[dict[str, Any]], min_speedup: float = 0.0) -> list[dict[str, Any]]:
    return [{**_common(r), "prompt": r["prompt"], "completion": r["reply"] or r["source"],
             "reward": reward(r["verdict"], r["speedup"]), "reasons": r["reasons"]}
            for r in rows if r["prompt"] and (not _accepted(r) or r["speedup"] >= min_speedup)]


def preference_records(rows: list[dict[str, Any]], min_speedup: float = 0.0) -> list[dict[str, Any]]:
    records = []
    for group in _by_problem(_unique(r for r in rows if r["prompt"])).values():
        chosen_pool = [r for r in group if _accepted(r) and r["speedup"] >= min_speedup]
        for chosen in chosen_pool:
            for other in group:
                better = (not _accepted(other)) or chosen["speedup"] >= PREFERENCE_MARGIN * other["speedup"]
                if other is chosen or not better:
                    continue
                records.append({**_common(chosen), "prompt": chosen["prompt"], "chosen": chosen["source"],
                                "rejected": other["source"], "chosen_speedup": chosen["speedup"],
                                "rejected_speedup": other["speedup"], "rejected_verdict": other["verdict"],
                                "rejected_prompt": other["prompt"], "shared_prompt": other["prompt"] == chosen["prompt"]})
    return sorted(records, key=lambda r: not r["shared_prompt"])


BUILDERS = {"sft": sft_records, "rl": rl_records, "preference": preference_records}
