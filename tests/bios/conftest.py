"""Fixtures of the BIOS tests: the real-sshd ones (tests/sshd_fixture.py) for the OS side of bios-verify, and the
simulator in mockup mode on a captured tree (mockup_factory; the corpus in tests/data/captures)."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import pytest
from sshd_fixture import sshd_host  # noqa: F401

from numaforge.lab.bmc import MockupSimulator

CAPTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "captures"


def capture_dirs() -> list[pathlib.Path]:
    """Every capture in tests/data/captures (a directory holding redfish/v1/index.json)."""
    return sorted(p for p in CAPTURES.iterdir() if (p / "redfish" / "v1" / "index.json").is_file())


@pytest.fixture
def mockup_factory():
    """Start the BMC simulator in mockup mode on a captured tree (docs/bmc-simulator.md, "Mockup mode"):
    ``mockup_factory(directory, password=..., power_delay=...)``; stopped after the test, which fails if the
    simulator saw a bug of its own."""
    sims = []

    def make(directory, password="s3cret-Bmc-pw", **kw):
        kw.setdefault("power_delay", 0.3)
        sim = MockupSimulator(directory, tls=True, username="admin", password=password, **kw).start()
        sims.append(sim)
        return sim

    yield make
    for s in sims:
        assert s.errors == [], f"simulator bugs: {s.errors}"
        s.stop()
