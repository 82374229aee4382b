"""shipping: what a user needs before they ship a kernel beyond the one shape the benchmark fixes.

Owns the shape envelope (envelope: the candidate judged again at variants of the problem's own sizes, and timed at
a few) and a problem at reduced precision (precision: `--precision fp16|bf16`). The envelope sits above the
pipeline: it calls `evaluate()` once per variant and never reaches into its stages.

May import: all of harness (it is a top floor, beside execution/) and kernelbench.
"""
