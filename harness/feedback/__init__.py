"""feedback: what the hardware says about a kernel, for the judge and the roofline.

Owns the device's peak figures (device_specs), the roofline placement (roofline), Nsight Compute's command and
its CSV (ncu), NVML telemetry (nvml) and the SASS instruction mix (sass). Readers and parsers only: running a
profile is an execution task (harness/execution/profile.py).

May import: harness.policy, harness.records and itself; no other stage.
"""
