"""verification: does the candidate compute what the reference computes, and is its source allowed to?

Owns the reference run (reference: outputs on trial and knock-out inputs, under the reference's own thread
budget), comparing outputs with tolerances (compare), the canaries that a weak check would let pass (canaries,
term_canaries, ablation; on a shrunk copy of the problem where its forward is slow: shrunk_copy; their pass/fail
comparison: clear_failure), and the static policy over Python and C++ sources (static_check, source_scan, findings).

May import: harness.policy, harness.records, harness.values, kernelbench (problems and shrinking) and itself.
"""
