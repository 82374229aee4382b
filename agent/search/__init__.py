"""The search around the loop's rounds: tuning a kernel's declared compile-time constants (tuning.py), a
population of kept kernels to choose parents from (population.py), and when to stop (stopping.py)."""
