"""execution: many evaluations, scheduled.

Owns the executors (executor: threads on this machine; ray_executor: a Ray cluster), the unit of work they run
(eval_task), and the jobs around an evaluation: prebuilding candidates ahead of their turn (prebuild),
profiling one under Nsight Compute (profile) and timing the references alone for a sweep's baselines
(baseline).

May import: all of harness (it is the top floor).
"""
