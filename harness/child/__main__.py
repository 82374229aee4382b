"""`python -m harness.child SCRATCH CMD_FD MSG_FD ROLE [SLOTS_FD]`: the program in the candidate's process
(harness/child/main.py). The zygote imports this module to preload the program and runs it as `__main__`."""

from harness.child.main import main

if __name__ == "__main__":
    main()
