"""`python -m harness.child SCRATCH CMD_FD MSG_FD ROLE [SLOTS_FD]`: the program in the candidate's process
(harness/child/main.py). The zygote imports this module to preload the program and runs it as `__main__`."""

from harness.child.census import prepare
from harness.child.main import main

prepare()  # 1.2 s of imports a dispatch mode's first use costs: paid once in the zygote, not in every fork

if __name__ == "__main__":
    main()
