"""numaforge task surface for `invoke` in a checkout. `invoke --list` shows every task; `invoke --help TASK`
documents its options. The installed `numaforge` command (numaforge/cli/main.py) runs the same tasks.

Each concern keeps its tasks in numaforge/cli/<concern>.py (a module-level ``TASKS`` list); namespace() collects
them into one flat namespace so `invoke backport build-kpatch` works as one command line.
"""

from numaforge.cli.main import namespace

ns = namespace()
