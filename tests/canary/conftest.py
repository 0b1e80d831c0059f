"""The real-sshd fixtures (tests/sshd_fixture.py) and a real Prometheus for the ssh-marked canary gate tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sshd_fixture import netns_lab, sshd_host, test_user  # noqa: F401
