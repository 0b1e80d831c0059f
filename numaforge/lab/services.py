"""The lab as one unit for `invoke lab-up` / `lab-down`: the qemu VM (numaforge.lab.vm) and the Redfish BMC
simulator daemon (python -m numaforge.lab.bmc), both bound to 127.0.0.1, state under numaforge.paths.lab_state_dir().

inventory/lab.yaml points at what this starts: ssh 127.0.0.1:2222 with .lab/ssh/{id_ed25519,known_hosts}, and
https://127.0.0.1:8443 with .lab/bmc/{ca.pem,password}.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from .. import paths
from ..errors import NumaforgeError
from ..program import prog
from . import vm as labvm
from .bmc.flavours import ALL_FLAVOURS, vendor_of

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
    system_id: str | None = None  # mockup mode: the captured system with a Bios (bmc.system_id)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def bmc_status(state_dir: Path | None = None) -> int | None:
    pidf = Path(state_dir or paths.lab_state_dir()) / "bmc" / "pid"
    try:
        pid = int(pidf.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _pid_alive(pid) else None


def bmc_up(
    flavour: str = "dell",
    port: int = BMC_PORT,
    state_dir: Path | None = None,
    power_delay: float = 5.0,
    timeout: float = 30.0,
    mockup: str | Path | None = None,
) -> BMCInfo:
    """Start the simulator daemon (or report the running one) and wait until it has written its URL. With
    ``mockup`` (a captured tree's directory) it serves that tree (numaforge.lab.bmc.mockup) instead of a flavour;
    the info's flavour is then ``mockup:<directory>``."""
    state_dir = Path(state_dir or paths.lab_state_dir())
    d = state_dir / "bmc"
    d.mkdir(parents=True, exist_ok=True)

    def system_id() -> str | None:
        f = d / "system_id"
        return f.read_text().strip() or None if f.is_file() else None

    pid = bmc_status(state_dir)
    if pid:
        return BMCInfo(
            (d / "url").read_text().strip(),
            pid,
            (d / "flavour").read_text().strip() if (d / "flavour").exists() else "?",
            str(d / "ca.pem"),
            str(d / "password"),
            True,
            system_id(),
        )
    (d / "url").unlink(missing_ok=True)
    (d / "system_id").unlink(missing_ok=True)
    if mockup is not None:
        mockup = Path(mockup).resolve()
        shape, label = ["--mockup", str(mockup)], f"mockup:{mockup}"
    else:
        shape, label = ["--flavour", flavour], flavour
    log = open(d / "daemon.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "numaforge.lab.bmc",
            *shape,
            "--port",
            str(port),
            "--state-dir",
            str(d),
            "--power-delay",
            str(power_delay),
        ],
        cwd=d,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    while not (d / "url").exists():
        if proc.poll() is not None:
            raise LabServiceError(
                f"the BMC simulator exited with rc={proc.returncode}: {(d / 'daemon.log').read_text()[-800:]}",
                "lab BMC",
                f"free 127.0.0.1:{port} (`{prog()} lab-down`) and retry",
            )
        if time.monotonic() > deadline:
            proc.kill()
            raise LabServiceError(
                f"the BMC simulator did not start within {timeout:.0f} s", "lab BMC", f"read {d / 'daemon.log'}"
            )
        time.sleep(0.2)
    (d / "flavour").write_text(label + "\n")
    return BMCInfo(
        (d / "url").read_text().strip(), proc.pid, label, str(d / "ca.pem"), str(d / "password"), False, system_id()
    )


def bmc_down(state_dir: Path | None = None, timeout: float = 10.0) -> bool:
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


def pick_port(preferred: int) -> int:
    """``preferred`` when free, else a free port the kernel hands out (lab-up without --ssh-port/--bmc-port)."""
    if labvm.port_free(preferred):
        return preferred
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lab_inventory_path(state_dir: Path | None = None) -> Path:
    """The inventory lab-up writes for what it started (``--inventory lab`` resolves to it)."""
    return Path(state_dir or paths.lab_state_dir()) / "inventory.yaml"


def flavour_vendor(flavour: str) -> str | None:
    """The vendor map of a running simulator's flavour; "auto" for a captured tree (``mockup:<dir>``: numaforge
    tells the vendor from the tree, as on a real BMC); None when the flavour is not known (an older daemon)."""
    if flavour.startswith("mockup:"):
        return "auto"
    return vendor_of(flavour) if flavour in ALL_FLAVOURS else None


def write_lab_inventory(
    ssh_port: int | None = None,
    bmc_url: str | None = None,
    state_dir: Path | None = None,
    vendor: str | None = None,
    system_id: str | None = None,
) -> Path:
    """Write the lab inventory from the inventory/lab.yaml template with the ports and state paths in use.

    A port not given keeps the value of the inventory written before (or the template's), so starting only the
    BMC or only the VM keeps the other side's entry; likewise ``vendor`` (the BMC flavour's vendor map,
    numaforge.lab.bmc.vendor_of), written as bmc.vendor and hardware.vendor ("auto", a captured tree's: bmc.vendor
    only, hardware.vendor left out). ``system_id`` (a captured tree with several systems) is bmc.system_id; a BMC
    started without one has none.
    """
    state_dir = Path(state_dir or paths.lab_state_dir()).resolve()
    out = lab_inventory_path(state_dir)
    template = paths.find_data("inventory", "lab.yaml")
    if template is None:
        raise LabServiceError(
            "the lab inventory template inventory/lab.yaml is missing",
            str(paths.BUILTIN),
            "reinstall numaforge, or add inventory/lab.yaml to your project",
        )
    doc = yaml.safe_load(template.read_text())
    host = doc["hosts"]["lab-vm"]
    if out.is_file():  # keep the side not (re)started now
        prev = (yaml.safe_load(out.read_text()) or {}).get("hosts", {}).get("lab-vm", {})
        host["ssh"]["port"] = prev.get("ssh", {}).get("port", host["ssh"]["port"])
        host["bmc"]["url"] = prev.get("bmc", {}).get("url", host["bmc"]["url"])
        host["bmc"]["vendor"] = prev.get("bmc", {}).get("vendor", host["bmc"]["vendor"])
        if "system_id" in prev.get("bmc", {}):
            host["bmc"]["system_id"] = prev["bmc"]["system_id"]
        if "vendor" in prev.get("hardware", {}):
            host["hardware"]["vendor"] = prev["hardware"]["vendor"]
        else:
            host["hardware"].pop("vendor", None)
    if ssh_port is not None:
        host["ssh"]["port"] = int(ssh_port)
    if bmc_url is not None:
        host["bmc"]["url"] = bmc_url
        host["bmc"].pop("system_id", None)
        if system_id:
            host["bmc"]["system_id"] = system_id
    if vendor == "auto":
        host["bmc"]["vendor"] = vendor
        host["hardware"].pop("vendor", None)
    elif vendor is not None:
        host["bmc"]["vendor"] = host["hardware"]["vendor"] = vendor
    host["ssh"].update(
        key_file=str(state_dir / "ssh" / "id_ed25519"), known_hosts=str(state_dir / "ssh" / "known_hosts")
    )
    host["bmc"].update(password=f"file:{state_dir / 'bmc' / 'password'}", ca_bundle=str(state_dir / "bmc" / "ca.pem"))
    header = (
        f"# Written by lab-up from {template}: the lab as it runs now (ports, keys, CA).\n"
        "# Use it with --inventory lab. Rewritten on every lab-up; edit the template instead.\n"
    )
    paths.atomic_write_text(out, header + yaml.safe_dump(doc, sort_keys=False))
    return out


@dataclass
class LabStatus:
    vm_running: bool
    vm_pid: int | None
    ssh_port: int | None
    kernel: str | None
    bmc_running: bool
    bmc_pid: int | None
    bmc_url: str | None
    inventory: str | None
    state_dir: str


def lab_status(state_dir: Path | None = None) -> LabStatus:
    """What of the lab runs now (read-only): VM pid/port/kernel, BMC pid/URL, the lab inventory."""
    state_dir = Path(state_dir or paths.lab_state_dir())
    v = labvm.status(state_dir)
    bpid = bmc_status(state_dir)
    url_file = state_dir / "bmc" / "url"
    inv = lab_inventory_path(state_dir)
    return LabStatus(
        v.running,
        v.pid if v.running else None,
        v.ssh_port if v.running else None,
        v.kernel if v.running else None,
        bpid is not None,
        bpid,
        url_file.read_text().strip() if bpid and url_file.is_file() else None,
        str(inv) if inv.is_file() else None,
        str(state_dir),
    )
