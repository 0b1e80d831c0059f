"""lab-up's BMC half: the simulator daemon starts detached, answers over verified TLS, and stops."""

from __future__ import annotations

import http.client
import json
import ssl
from urllib.parse import urlparse

import pytest

from numaforge.lab import services

pytestmark = pytest.mark.bmc


def test_bmc_daemon_up_verified_tls_and_down(tmp_path):
    info = services.bmc_up(flavour="hpe", port=0, state_dir=tmp_path, power_delay=0.5)
    try:
        assert not info.already_running
        again = services.bmc_up(flavour="hpe", port=0, state_dir=tmp_path)
        assert again.already_running and again.pid == info.pid and again.url == info.url
        u = urlparse(info.url)
        ctx = ssl.create_default_context(cafile=info.ca_file)  # verification on, hostname checked
        conn = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=10)
        conn.request("GET", "/redfish/v1/")
        root = json.loads(conn.getresponse().read())
        assert root["@odata.id"] == "/redfish/v1/"
        # the password file is private to the user and is what inventory/lab.yaml references
        assert (tmp_path / "bmc" / "password").stat().st_mode & 0o077 == 0
    finally:
        assert services.bmc_down(tmp_path) is True
    assert services.bmc_status(tmp_path) is None
    assert services.bmc_down(tmp_path) is False


def test_bmc_daemon_reports_busy_port(tmp_path):
    first = services.bmc_up(flavour="generic", port=0, state_dir=tmp_path / "a")
    try:
        port = urlparse(first.url).port
        with pytest.raises(services.LabServiceError, match="exited"):
            services.bmc_up(flavour="generic", port=port, state_dir=tmp_path / "b")
    finally:
        services.bmc_down(tmp_path / "a")
