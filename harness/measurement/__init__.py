"""measurement: the timing protocol, driven and clocked by the parent.

Owns the timed batches (timed_calls: alternate reference and candidate, each on the parent's own clock, the
other side frozen), the parent-driven calls through the frozen child's memory (frozen_calls), the correctness
trials run through the same slots and `run` command as every timed call (frozen_trials), the checks made on
timed calls (timed_checks: probes at secret positions, a few compared in full) and the statistics
(timing: summaries, the speedup's interval, clock against CUDA events).

May import: harness.policy, harness.records, harness.values, harness.isolation, harness.verification and
itself.
"""
