"""audits: the batches among the timed calls that check what was timed, each in a file of its own.

An audit batch is made exactly like every timed batch (fresh inputs, every side, every call probed), at a position
only the parent draws, and its samples are never kept. Each audit declares its registry row (harness/checks.py),
when it runs, what it asks of the candidate's batch (one `Audit` field of the `run`/`go` command,
harness/isolation/protocol.py), how the child's `done` is read, and the facts it yields (`Audited`, which
harness/decision/gates.py reads through `TimedRun`): `knockout.py` (every kernel function poisoned for one call:
its output must be wrong), `share.py` (the time inside the kernel functions against the parent's clock, CPU),
`census.py` (the PyTorch operators forward ran outside the kernels). Where nothing is timed, the knock-out and the
census are calls of their own after the trials (harness/gathering/conversation.py); their readings are here too.

May import: harness.policy, harness.records, harness.checks, harness.defences, harness.isolation (the protocol),
harness.verification and itself; harness.measurement and harness.gathering import it.
"""
