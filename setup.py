"""Wheel build step: ship the built-in data as package data (everything else is in pyproject.toml).

The BIOS and host OS profiles, vendor maps, patch series, kpatch targets and lab kernel files, and inventory templates live at the
top of the checkout (bios/, hostos/, patches/, kpatch/targets, kpatch/lab, inventory/). build_py copies them into
numaforge/_data in the wheel, where numaforge.paths finds them when no checkout is around; a project directory's
own files override them.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
DATA_DIRS = ("bios", "hostos", "patches", "kpatch/targets", "kpatch/lab", "inventory")   # = numaforge.paths.DATA_DIRS


class BuildPyWithData(build_py):
    def run(self):
        super().run()
        if self.editable_mode:   # an editable install reads the checkout itself
            return
        dest = Path(self.build_lib) / "numaforge" / "_data"
        for d in DATA_DIRS:
            src = HERE / d
            if not src.is_dir():
                raise SystemExit(f"setup.py: data directory {src} is missing; build from a full checkout")
            shutil.copytree(src, dest / d, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("build", "__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithData})
