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


def test_lab_up_and_down_say_changed_when_they_start_or_stop_something(tmp_path):
    """Issue 39 item 9: lab-up and lab-down said "unchanged" when they started or stopped the lab. The real
    tasks (BMC half only: --no-vm), twice each: the second run finds it running / stopped and changes nothing."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from sshd_fixture import free_port

    root, env = Path(__file__).parents[1], {**os.environ, "NUMAFORGE_STATE": str(tmp_path / "state")}

    def run(*args: str) -> dict:
        out = tmp_path / "r.json"
        cmd = [sys.executable, "-m", "invoke", *args, "--json", str(out)]
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (host,) = json.loads(out.read_text())["hosts"]
        return host

    port = str(free_port())
    try:
        up = run("lab-up", "--no-vm", "--bmc-port", port)
        assert up["status"] == "changed" and "started the BMC simulator" in up["message"], up
        again = run("lab-up", "--no-vm", "--bmc-port", port)
        assert again["status"] == "unchanged" and "already running" in again["message"], again
    finally:
        down = run("lab-down")
    assert down["status"] == "changed" and "stopped the BMC simulator" in down["message"], down
    assert run("lab-down")["status"] == "unchanged"
