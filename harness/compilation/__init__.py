"""compilation: both ends of the build protocol, and the compilers behind it.

Owns the child's end (build_cache: `load_inline`/`load` become requests; binaries keyed by content, imported
from the read-only cache; the kernel switch that counts and poisons the candidate's own ops) and the parent's
(build_service: plans, compiles in a jail, caches; native_build and cuda_compile: the compiler command lines;
pch: precompiled headers; compile_slots: how many compiles at once; compiler_report: ptxas's registers and
spills).

May import: harness.paths, harness.policy, harness.records, harness.values, harness.feedback (the SASS mix of
a build), harness.verification (the C++ scan of a build's own ops) and harness.isolation (compiles run jailed).
"""
