"""decision: the verdict, decided in one place.

Owns the record of what an evaluation gathered (facts), the arithmetic of a timed run (timing_reading: the
samples believed, the speedup, its interval widened by the A/A noise floor) and the ordered gates that turn the
facts into a verdict with its findings (gates). Pure: nothing here starts a process or reads a file.

May import: harness.policy, harness.records, harness.checks (the registry), harness.defences, harness.child, harness.measurement,
harness.isolation (records only), harness.verification and itself.
"""
