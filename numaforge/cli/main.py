"""The `numaforge` command: Invoke's Program over the same tasks `invoke` finds in a checkout's tasks.py.

    numaforge --list                         # from any directory
    numaforge --root ~/myfleet bios-plan     # a project directory: bios/, inventory/, patches/, kpatch/targets/

Config files are Invoke's with the numaforge prefix: /etc/numaforge.yaml, ~/.numaforge.yaml and numaforge.yaml
in the project directory (``numaforge: {inventory: fleet.yaml, root: ...}``); numaforge.paths resolves data and
output locations from the project directory.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

from invoke import Argument, Collection, Config, Program

from .. import __version__, paths
from . import __path__ as _cli_path
from . import values


def namespace() -> Collection:
    """Every task of numaforge/cli/*.py (each module's ``TASKS``) in one flat collection."""
    ns = Collection()
    for info in sorted(pkgutil.iter_modules(_cli_path), key=lambda m: m.name):
        module = importlib.import_module(f"{__package__}.{info.name}")
        for t in getattr(module, "TASKS", []):
            ns.add_task(t)
    ns.configure({"numaforge": {"inventory": "lab"}})
    return ns


class NumaforgeConfig(Config):
    prefix = "numaforge"
    file_prefix = "numaforge"  # type: ignore[assignment]
    env_prefix = "NUMAFORGE_CFG"  # type: ignore[assignment]


class NumaforgeProgram(Program):
    def core_args(self) -> list[Argument]:
        return super().core_args() + [
            Argument(
                names=("root",),
                help="project directory (bios/, inventory/, patches/, kpatch/targets/); "
                "default: $NUMAFORGE_ROOT, else the current directory",
            )
        ]

    def parse_collection(self) -> None:
        super().parse_collection()
        root = self.args.root.value
        try:  # `--root ''` is a usage error, not the current directory
            values.reject_empty({"root": root})
        except values.OptionValueError as exc:
            print(f"error: {exc.render()}", file=sys.stderr)
            raise SystemExit(exc.exit_code) from None
        try:
            if root:
                paths.set_project_dir(root)
        except paths.ProjectError as exc:  # a missing directory or a file: a usage error, not a traceback
            print(f"error: {exc.render()}", file=sys.stderr)
            raise SystemExit(exc.exit_code) from None
        self.config.set_project_location(str(paths.project_dir()))
        self.config.load_project()


program = NumaforgeProgram(
    namespace=namespace(), version=__version__, name="numaforge", binary="numaforge", config_class=NumaforgeConfig
)


def main() -> None:
    program.run()
