"""child: one child process, both sides of it.

Owns the job a child is given and the result it writes (job), the program that runs in the candidate's (or the
reference's) process (main, run as `python -m harness.child`, answering the commands of
harness/isolation/protocol.py by type with its handlers kept by command group: loading, correctness, timing,
probing; process and calls hold what they share; census is the compute census), and the parent's side
of one child run: its scratch folder (scratch), starting it with its build service (child_run) and reading how it
ended (verdicts). The program's modules are the only harness modules written to run beside candidate code; what
they import from compilation, isolation, values and measurement is all the harness code that process holds.

May import: harness.paths, harness.policy, harness.records and every stage below it (values, feedback,
isolation, verification, compilation, measurement).
"""
