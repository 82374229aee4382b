"""The static policy over CUDA-L1's published kernels: which are rejected before anything runs, and why.

    python benchmarks/cuda_l1_static.py PATH/TO/optimized_cuda_code/h100.json [--levels 1,2] [--show TAG]

The file is CUDA-L1's own (one JSON object per line: level_id, task_id, ref_code, custom_code, ...); this script
fetches nothing. It prints, per check, how many kernels it rejects (each kernel counted under every fatal check
it trips, and once under the first), so a false alarm shows up as a check that rejects kernels it should not.
`--show TAG` prints each rejected kernel's finding for that check, to classify them by hand. `--smoke` checks the
bundled CUDA candidates instead of a CUDA-L1 file (that the script runs; nothing there should be rejected).
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from harness.policy import EvalPolicy
from harness.verification.static_check import check_candidate

HEADING = "# The static policy over published kernels"


def read_rows(path: Path, levels: set[int]) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if int(r.get("level_id", 0)) in levels]


def bundled_rows() -> list[dict]:
    """The bundled CUDA candidates in CUDA-L1's row format, and one task without a kernel."""
    from kernelbench.bundled import bundled_candidate, bundled_problems

    rows = [{"level_id": 0, "task_id": 0, "custom_code": None}]
    for problem in bundled_problems():
        try:
            source = bundled_candidate(problem, "cuda").read_text()
        except Exception:
            continue
        rows.append({"level_id": problem.level, "task_id": problem.problem_id, "custom_code": source})
    return rows


def published(row: dict) -> bool:
    """CUDA-L1 left some tasks without a kernel (null, or the string "None"): nothing to check."""
    return (row.get("custom_code") or "None").strip() != "None"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, nargs="?", help="CUDA-L1's optimized_cuda_code/<gpu>.json")
    parser.add_argument("--levels", default="1,2")
    parser.add_argument("--show", default="")
    parser.add_argument("--smoke", action="store_true", help="the bundled CUDA candidates instead of a file")
    args = parser.parse_args()
    if not (args.path or args.smoke):
        parser.error("give CUDA-L1's JSON file (or --smoke)")
    levels = {int(v) for v in args.levels.split(",")}
    everything = [r for r in bundled_rows() if r["level_id"] in levels | {0}] if args.smoke else \
        read_rows(args.path, levels)
    print(HEADING + (" (smoke run: the bundled CUDA candidates)" if args.smoke else f" ({args.path.name})"))
    rows = [r for r in everything if published(r)]
    policy = EvalPolicy()
    first: collections.Counter[str] = collections.Counter()
    every: collections.Counter[str] = collections.Counter()
    for row in rows:
        report = check_candidate(row["custom_code"], policy)
        fatal = [f for f in report.findings if f.fatal]
        if not fatal:
            continue
        first[fatal[0].check] += 1
        for check in dict.fromkeys(f.check for f in fatal):
            every[check] += 1
        for finding in fatal:
            if finding.check == args.show:
                print(f"L{row['level_id']} #{row['task_id']}: {finding.render()[:300]}")
    rejected = sum(first.values())
    print(f"\n{len(everything)} tasks, {len(everything) - len(rows)} without a published kernel; of {len(rows)} kernels, "
          f"{rejected} are rejected statically and {len(rows) - rejected} go on to be built and run\n")
    print("| check | rejects (any) | rejects (first) |\n|---|---|---|")
    for check, count in every.most_common():
        print(f"| {check} | {count} | {first[check]} |")


if __name__ == "__main__":
    main()
