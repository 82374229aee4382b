"""feedback: what the hardware says about a kernel, for the judge and the roofline.

Owns the device's peak figures (device_specs), the roofline placement (roofline), Nsight Compute's command and
its CSV (ncu), NVML telemetry (nvml), the SASS instruction mix (sass), and failure reasons digested for a model
(failure_digest: a build log's compiler errors mapped to the candidate's lines, a traceback's own frames). Readers
and parsers only: running a profile is an execution task (harness/execution/profile.py).

May import: harness.policy, harness.records and itself; no other stage.
"""
