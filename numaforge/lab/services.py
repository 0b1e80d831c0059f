"""The lab as one unit for `invoke lab-up` / `lab-down`: the qemu VM (numaforge.lab.vm) and the Redfish BMC
simulator daemon (python -m numaforge.lab.bmc), both bound to 127.0.0.1, state under ./.lab.

inventory/lab.yaml points at what this starts: ssh 127.0.0.1:2222 with .lab/ssh/{id_ed25519,known_hosts}, and
https://127.0.0.1:8443 with .lab/bmc/{ca.pem,password}.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import NumaforgeError
from ..paths import ROOT

STATE_DIR = ROOT / ".lab"
BMC_PORT = 8443


class LabServiceError(NumaforgeError):
    """A lab service did not start or stop."""


@dataclass
class BMCInfo:
    url: str
    pid: int
    flavour: str
    ca_file: str
    password_file: str
    already_running: bool = False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def bmc_status(state_dir: Path = STATE_DIR) -> int | None:
    pidf = Path(state_dir) / "bmc" / "pid"
    try:
        pid = int(pidf.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _pid_alive(pid) else None


def bmc_up(flavour: str = "dell", port: int = BMC_PORT, state_dir: Path = STATE_DIR,
           power_delay: float = 5.0, timeout: float = 30.0) -> BMCInfo:
    """Start the simulator daemon (or report the running one) and wait until it has written its URL."""
    d = Path(state_dir) / "bmc"
    d.mkdir(parents=True, exist_ok=True)
    pid = bmc_status(state_dir)
    if pid:
        return BMCInfo((d / "url").read_text().strip(), pid, (d / "flavour").read_text().strip()
                       if (d / "flavour").exists() else "?", str(d / "ca.pem"), str(d / "password"), True)
    (d / "url").unlink(missing_ok=True)
    log = open(d / "daemon.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "numaforge.lab.bmc", "--flavour", flavour, "--port", str(port),
                             "--state-dir", str(d), "--power-delay", str(power_delay)],
                            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + timeout
    while not (d / "url").exists():
        if proc.poll() is not None:
            raise LabServiceError(f"the BMC simulator exited with rc={proc.returncode}: "
                                  f"{(d / 'daemon.log').read_text()[-800:]}", "lab BMC",
                                  f"free 127.0.0.1:{port} (`invoke lab-down`) and retry")
        if time.monotonic() > deadline:
            proc.kill()
            raise LabServiceError(f"the BMC simulator did not start within {timeout:.0f} s", "lab BMC",
                                  f"read {d / 'daemon.log'}")
        time.sleep(0.2)
    (d / "flavour").write_text(flavour + "\n")
    return BMCInfo((d / "url").read_text().strip(), proc.pid, flavour, str(d / "ca.pem"), str(d / "password"))


def bmc_down(state_dir: Path = STATE_DIR, timeout: float = 10.0) -> bool:
    pid = bmc_status(state_dir)
    if not pid:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _pid_alive(pid) and time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.1)
    if _pid_alive(pid):
        os.kill(pid, signal.SIGKILL)
    return True
