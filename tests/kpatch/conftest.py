"""Shared fixtures of the kpatch tier."""

from __future__ import annotations

from pathlib import Path

import pytest

SERIES = "sched-numa-prefer-local-fallback"


@pytest.fixture(scope="module")
def bp():
    """The 5.10.262 backport output the lab and Debian targets build from (made if missing)."""
    from numaforge.kernel import backport

    res = backport.latest(SERIES, base_version="5.10.262")
    if res is None or not Path(res.combined_patch).exists():
        res = backport.backport("debian:linux-source-5.10=5.10.262-1", series=SERIES, compile_check=False)
    return res
