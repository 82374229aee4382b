"""A user's whole model: profile it at the shapes it is served at, extract the hot regions as KernelBench
problems, compose the accepted kernels back as guarded modules, and hand the whole model to `eval`.

Imports one way: kernelwright -> regions -> sweeps -> agent -> harness -> kernelbench. Nothing here judges a
kernel: the harness does (problems in, evaluations out)."""
