"""numaforge task surface. `invoke --list` shows every task; `invoke --help TASK` documents its options.

Each concern keeps its tasks in numaforge/cli/<concern>.py (a module-level ``TASKS`` list); this file only
collects them into one flat namespace so `invoke backport build-kpatch` works as one command line.
"""

import importlib
import pkgutil

from invoke import Collection

import numaforge.cli

ns = Collection()
for info in sorted(pkgutil.iter_modules(numaforge.cli.__path__), key=lambda m: m.name):
    module = importlib.import_module(f"numaforge.cli.{info.name}")
    for t in getattr(module, "TASKS", []):
        ns.add_task(t)
ns.configure({"numaforge": {"inventory": "inventory/lab.yaml"}})
