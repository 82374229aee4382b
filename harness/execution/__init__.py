"""execution: many evaluations, scheduled.

Owns the executors (executor: threads on this machine; ray_executor: a Ray cluster), the unit of work they run
(eval_task), and the jobs around an evaluation: prebuilding candidates ahead of their turn (prebuild),
profiling one under Nsight Compute (profile) and timing a sweep's baselines, eager against torch.compile by
the candidates' own protocol (baseline).

May import: all of harness (it is the top floor).
"""
