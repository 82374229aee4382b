"""isolation: untrusted code runs in a process the parent contains, freezes and reads.

Owns the kernel-enforced walls (cgroups: memory, CPU sets, the freezer; jail: namespaces and sealed file
systems; sandbox: environment, limits, process trees), the fork server (zygote), the parent's conversation
with one jailed child (session, over channel), the memory the parent writes and reads while the child is frozen
(shared_slots, remote_memory), the machine-wide timing slot that freezes builds while anything is timed
(timing_slot) and the scratch quota (scratch_quota). It runs any program it is given: which program runs in the
child is the child stage's (harness/child/), named to the zygote by the session as a module name.

May import: harness.paths, harness.values and itself.
"""
