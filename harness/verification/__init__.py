"""verification: does the candidate compute what the reference computes, and is its source allowed to?

Owns the reference run (reference: outputs on trial and knock-out inputs, under the reference's own thread
budget), comparing outputs with tolerances (compare), the canaries that a weak check would let pass (canaries,
term_canaries), and the static policy over Python and C++ sources (static_check, source_scan, findings).

May import: harness.policy, harness.records, harness.values and itself.
"""
