"""Tasks: lab-up, lab-down, lab-status — the built-in lab (VM + BMC simulator on 127.0.0.1) and its inventory.

lab-up writes the lab inventory (numaforge.lab.services.write_lab_inventory) with the ports it used;
`--inventory lab` (the default) resolves to it.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from ..lazy import lazy_module
from ..report import Report
from . import common, values
from .optionsets import task

if TYPE_CHECKING:
    from ..lab import services
    from ..lab import vm as labvm
    from ..lab.bmc import flavours as bmc_flavours
else:  # imported by the task that uses them (numaforge.lazy)
    services = lazy_module("numaforge.lab.services")
    labvm = lazy_module("numaforge.lab.vm")
    bmc_flavours = lazy_module("numaforge.lab.bmc.flavours")


@task(
    checks={  # run before anything starts (numaforge.cli.values.preflight)
        "kernel": values.choice("--kernel", "lab", "debian"),
        "topology": lambda v: values.choice("--topology", *labvm.TOPOLOGIES)(v),
        "bmc_flavour": lambda v: values.choice("--bmc-flavour", *bmc_flavours.ALL_FLAVOURS)(v),
        "ssh_port": lambda v: values.port_number(v, "--ssh-port"),
        "bmc_port": lambda v: values.port_number(v, "--bmc-port"),
    },
    help={
        "kernel": "kernel the VM boots: lab (our 5.10.262 build, built and cached if needed) or debian "
        "(bullseye's 5.10.0-46-amd64)",
        "topology": "NUMA shape of the VM: backplane4 (default: 4 nodes, SLIT 16/32), nps2 (EPYC-like 2-socket NPS2: "
        "10/12/32), cpuless4 (node 3 memory-only) or 2node (control)",
        "bmc_flavour": "vendor shape of the simulated BMC: dell (default), hpe, supermicro, lenovo, generic, or a "
        "vendor generation (hpe-gen11, dell-16g, smc-h13, ...; docs/bmc-simulator.md lists them); the lab "
        "inventory gets its vendor",
        "bmc_mockup": "serve this captured Redfish tree (DMTF mockup layout, e.g. bios-capture's output or "
        "tests/data/captures/*) instead of a flavour; the lab inventory gets bmc.vendor auto "
        "(docs/bmc-simulator.md, Mockup mode)",
        "vm": "start the VM (--no-vm to start only the BMC simulator)",
        "bmc": "start the BMC simulator (--no-bmc to start only the VM)",
        "persist": "attach the VM's persistent disk (<lab state>/vm/persist.img): host OS settings survive a VM reboot",
        "numa_nic": "add a virtio-net NIC local to NUMA node 1 (PCI 0000:21:04.0) for the host OS pipeline",
        "ssh_port": "127.0.0.1 port for the VM's SSH (default 2222, or a free port when 2222 is busy)",
        "bmc_port": "127.0.0.1 port for the BMC simulator (default 8443, or a free port when 8443 is busy)",
    },
)
def lab_up(
    c,
    kernel="lab",
    topology="backplane4",
    bmc_flavour="dell",
    bmc_mockup=None,
    vm=True,
    bmc=True,
    persist=False,
    numa_nic=False,
    ssh_port=None,
    bmc_port=None,
    json=None,
):
    """Start the lab: a NUMA qemu VM (--topology) and a Redfish BMC simulator on 127.0.0.1; write its inventory."""

    mockup = values.mockup_dir(bmc_mockup, "--bmc-mockup")

    def body(report: Report):
        host = report.host("lab-vm")
        host.status = "unchanged"  # "changed" once this run started something (the report's vocabulary)
        started: list[str] = []
        url = vport = vendor = None
        if bmc:
            with host.step("bmc-up") as s:
                port = int(bmc_port) if bmc_port else services.pick_port(services.BMC_PORT)
                info = services.bmc_up(flavour=bmc_flavour, port=port, mockup=mockup)
                s.detail = asdict(info)
                url = info.url
                # the running BMC's flavour (an already running one may differ from --bmc-flavour)
                vendor = services.flavour_vendor(info.flavour)
                if not info.already_running:
                    started.append("BMC simulator")
            common.console.print(
                f"bmc: {info.flavour} simulator at {info.url} (pid {info.pid}"
                f"{', already running' if info.already_running else ''})"
            )
        if vm:
            with host.step("vm-up") as s:
                port = int(ssh_port) if ssh_port else services.pick_port(labvm.DEFAULT_SSH_PORT)
                common.console.print(f"vm: booting the {kernel} kernel under qemu (TCG boots take 10-50 s)...")
                vinfo = labvm.up(kernel=kernel, topo=topology, persist=persist, numa_nic=numa_nic, ssh_port=port)
                s.detail = asdict(vinfo)
                vport = vinfo.ssh_port
                if not vinfo.already_running:
                    started.append("VM")
            common.console.print(
                f"vm: {vinfo.release} with {vinfo.nodes} NUMA nodes ({vinfo.topology}), ssh on 127.0.0.1:{vinfo.ssh_port}"
                f" (ready after {vinfo.ssh_seconds} s)"
            )
        inv = services.write_lab_inventory(
            ssh_port=vport, bmc_url=url, vendor=vendor, system_id=info.system_id if bmc else None
        )
        report.data["inventory"] = str(inv)
        common.console.print(f"inventory: {inv} (--inventory lab)")
        if started:
            host.status, host.message = "changed", f"lab is up: started the {' and the '.join(started)}"
        else:
            host.message = "lab is up: it was already running"

    common.execute("lab-up", body, json=json)


@task
def lab_down(c, json=None):
    """Stop the lab VM and the BMC simulator (logs, keys and the lab inventory stay in the lab state dir)."""

    def body(report: Report):
        host = report.host("lab-vm")
        stopped = []
        with host.step("vm-down") as s:
            s.detail = {"was_running": labvm.down()}
            stopped += ["VM"] if s.detail["was_running"] else []
        with host.step("bmc-down") as s:
            s.detail = {"was_running": services.bmc_down()}
            stopped += ["BMC simulator"] if s.detail["was_running"] else []
        if stopped:  # the report's vocabulary: this run stopped something
            host.status, host.message = "changed", f"lab is down: stopped the {' and the '.join(stopped)}"
        else:
            host.status, host.message = "unchanged", "lab is down: nothing was running"

    common.execute("lab-down", body, json=json)


@task
def lab_status(c, json=None):
    """Show what of the lab runs: VM (pid, ssh port, kernel), BMC simulator (pid, URL), the lab inventory."""

    def body(report: Report):
        st = services.lab_status()
        host = report.host("lab-vm")
        host.data = asdict(st)
        vm_text = (
            f"running, pid {st.vm_pid}, ssh 127.0.0.1:{st.ssh_port}, kernel {st.kernel}" if st.vm_running else "stopped"
        )
        bmc_text = f"running, pid {st.bmc_pid}, {st.bmc_url}" if st.bmc_running else "stopped"
        for key, text in (
            ("vm", vm_text),
            ("bmc", bmc_text),
            ("inventory", st.inventory or "none (run lab-up)"),
            ("state", st.state_dir),
        ):
            common.console.print(f"{key:<10} {text}", soft_wrap=True)
        host.message = f"vm {'up' if st.vm_running else 'down'}, bmc {'up' if st.bmc_running else 'down'}"

    common.execute("lab-status", body, json=json)


TASKS = [lab_up, lab_down, lab_status]
