"""What the hardening costs: the same candidates evaluated with and without the runtime integrity checks,
interleaved in one run, with the time per phase.

    .venv/bin/python benchmarks/bench_hardening.py [--problems relu,softmax,mlp] [--repeats 3] [--smoke]

Builds are cached first so both sides measure evaluation, not compilation.
"""

from __future__ import annotations

import argparse
import statistics

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Evaluation
from kernelbench.bundled import bundled_candidate, find_bundled

HEADING = "# What the hardening costs: plain vs hardened evaluations"
PHASES = ("static", "reference", "import", "construct", "correctness", "timing", "canaries", "child", "total")


def _phases(evaluations: list[Evaluation]) -> dict[str, float]:
    return {p: statistics.median(e.phase_seconds.get(p, 0.0) for e in evaluations) for p in PHASES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default="relu,softmax,Square_matrix_multiplication,MLP")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="that the script runs: ReLU only, one repeat, a 0.05 s "
                        "timing budget (its figures mean nothing)")
    args = parser.parse_args()
    if args.smoke:
        args.problems, args.repeats = "relu", 1
    base = dict(timing_budget_s=0.05 if args.smoke else 0.5, static_policy="default")
    print(HEADING + (" (smoke run: the figures are not measurements)" if args.smoke else ""))
    policies = {"plain": EvalPolicy(hardening=False, trials=3, **base), "hardened": EvalPolicy(**base)}
    print(f"{'problem':<32} {'side':<9} " + " ".join(f"{p:>11}" for p in PHASES))
    totals: dict[str, list[float]] = {name: [] for name in policies}
    for name in args.problems.split(","):
        problem = find_bundled(name)
        source = bundled_candidate(problem).read_text()
        evaluate(problem, source, "cpu", policies["plain"])  # warm the build cache
        runs: dict[str, list[Evaluation]] = {side: [] for side in policies}
        for _ in range(args.repeats):
            for side, policy in policies.items():  # interleaved: machine drift hits both sides alike
                evaluation = evaluate(problem, source, "cpu", policy)
                assert evaluation.accepted, evaluation.reasons
                runs[side].append(evaluation)
        for side, evaluations in runs.items():
            phases = _phases(evaluations)
            totals[side].append(phases["total"])
            print(f"{problem.key:<32} {side:<9} " + " ".join(f"{phases[p]:>10.3f}s" for p in PHASES))
    plain, hardened = sum(totals["plain"]), sum(totals["hardened"])
    print(f"\nall problems: plain {plain:.2f} s, hardened {hardened:.2f} s, hardened / plain = {hardened / plain:.2f}x")
    print("Both sides run the sealed pipeline (jailed children, reference timed in its own process on the parent's "
          "clock, fresh inputs per timed call). plain = 3 trials of the problem's own inputs, one candidate call "
          "each, no integrity checks, no timed-output checks; hardened = 5 trials over 5 distributions, candidate "
          "called before and after the reference into poisoned memory, mutation/aliasing/fingerprint/identity/"
          "thread checks, knock-out run, 300 timed outputs checked with post-timer probes, canaries.")


if __name__ == "__main__":
    main()
