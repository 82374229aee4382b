"""kernelwright: LLM-written kernels, proven by a harness that treats every candidate as hostile."""

__version__ = "0.1.0"
