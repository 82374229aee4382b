"""Evaluate one candidate against one problem on one device. Knows nothing of LLMs.

Import each name from its home, so readers and tools see the product's main call: `evaluate` from
harness/pipeline.py, `EvalPolicy` from harness/policy.py, `Evaluation` and `Verdict` from harness/records.py,
`checks_version` from harness/decision/version.py. This package itself imports nothing, so `import
harness.device` (the CLI's --help, say) does not pull in pydantic and every stage.
"""
