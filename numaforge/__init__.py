"""numaforge: kernel live-patch and BIOS tuning pipelines for EPYC + GPUDirect fleets on Linux 5.10 LTS."""

import os as _os

__version__ = "0.1.0"

# GitPython refuses to import when no git binary is on PATH; `invoke doctor` must still run there and say
# how to install git, so the missing binary is reported when git is used, not at import time.
_os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")
