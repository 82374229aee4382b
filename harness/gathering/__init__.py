"""gathering: the conversation with the reference's and the candidate's processes, handed back as complete facts.

Owns starting the processes of one evaluation (the candidate's, the reference's timing process and its A/A copy,
the fresh sets of timed processes), the conversation with the candidate's (`conversation.py`: load, the trials,
the audit calls where nothing is timed, the timing, finish, each step returning what it heard), what its files say
once it is done (`outputs.py`) and the one call that does all of it and returns an immutable `Facts` (`gather.py`).
Decides nothing: the gates (harness/decision/) read the facts; the correctness gates are asked only whether the
conversation goes on, so nothing is timed that is already decided.

May import: harness.policy, harness.records, harness.defences, harness.paired_timing, harness.decision,
harness.child, harness.measurement, harness.isolation, harness.verification, harness.values, harness.feedback,
harness.compilation and itself; never harness.pipeline, harness.execution or harness.shipping (they import it).
"""
