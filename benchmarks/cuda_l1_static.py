"""The static policy over CUDA-L1's published kernels: which are rejected before anything runs, and why.

    python benchmarks/cuda_l1_static.py PATH/TO/optimized_cuda_code/h100.json [--levels 1,2] [--show TAG]

The file is CUDA-L1's own (one JSON object per line: level_id, task_id, ref_code, custom_code, ...); this script
fetches nothing. It prints, per check, how many kernels it rejects (each kernel counted under every fatal check
it trips, and once under the first), so a false alarm shows up as a check that rejects kernels it should not.
`--show TAG` prints each rejected kernel's finding for that check, to classify them by hand.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from harness.policy import EvalPolicy
from harness.verification.static_check import check_candidate


def read_rows(path: Path, levels: set[int]) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if int(r.get("level_id", 0)) in levels]


def published(row: dict) -> bool:
    """CUDA-L1 left some tasks without a kernel (null, or the string "None"): nothing to check."""
    return (row.get("custom_code") or "None").strip() != "None"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--levels", default="1,2")
    parser.add_argument("--show", default="")
    args = parser.parse_args()
    everything = read_rows(args.path, {int(v) for v in args.levels.split(",")})
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
