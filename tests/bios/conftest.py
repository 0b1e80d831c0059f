"""The real-sshd fixtures (tests/sshd_fixture.py) for the OS side of bios-verify."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from sshd_fixture import sshd_host  # noqa: F401
