"""Tasks: lab-up, lab-down — the built-in lab behind inventory/lab.yaml (VM + BMC simulator on 127.0.0.1)."""

from __future__ import annotations

from dataclasses import asdict

from invoke import task

from ..report import Report
from . import common


@task(help={
    "kernel": "kernel the VM boots: lab (our 5.10.262 build, built and cached if needed) or debian "
              "(bullseye's 5.10.0-46-amd64)",
    "topology": "NUMA shape of the VM: backplane4 (default: 4 nodes, SLIT 16/32), nps2 (EPYC-like 2-socket NPS2: "
                "10/12/32), cpuless4 (node 3 memory-only) or 2node (control)",
    "bmc_flavour": "vendor shape of the simulated BMC: dell (default), hpe, supermicro, lenovo, generic",
    "vm": "start the VM (--no-vm to start only the BMC simulator)",
    "bmc": "start the BMC simulator (--no-bmc to start only the VM)",
    "persist": "attach the VM's persistent disk (.lab/vm/persist.img): host OS settings survive a VM reboot",
    "numa_nic": "add a virtio-net NIC local to NUMA node 1 (PCI 0000:21:04.0) for the host OS pipeline",
    "json": common.SELECT_HELP["json"],
})
def lab_up(c, kernel="lab", topology="backplane4", bmc_flavour="dell", vm=True, bmc=True, persist=False, numa_nic=False,
           json=None):
    """Start the lab: a NUMA qemu VM (--topology) (ssh 127.0.0.1:2222) and a Redfish BMC simulator (127.0.0.1:8443)."""
    from ..lab import services
    from ..lab import vm as labvm

    def body(report: Report):
        host = report.host("lab-vm")
        if bmc:
            with host.step("bmc-up") as s:
                info = services.bmc_up(flavour=bmc_flavour)
                s.detail = asdict(info)
            common.console.print(f"bmc: {info.flavour} simulator at {info.url} (pid {info.pid}"
                                 f"{', already running' if info.already_running else ''})")
        if vm:
            with host.step("vm-up") as s:
                common.console.print(f"vm: booting the {kernel} kernel under qemu (TCG boots take 10-50 s)...")
                vinfo = labvm.up(kernel=kernel, topo=topology, persist=persist, numa_nic=numa_nic)
                s.detail = asdict(vinfo)
            common.console.print(f"vm: {vinfo.release} with {vinfo.nodes} NUMA nodes ({vinfo.topology}), ssh on 127.0.0.1:{vinfo.ssh_port}"
                                 f" (ready after {vinfo.ssh_seconds} s)")
        host.message = "lab is up"

    common.execute("lab-up", body, json=json, options={"kernel": kernel, "topology": topology,
                                                         "bmc_flavour": bmc_flavour, "persist": persist,
                                                         "numa_nic": numa_nic})


@task(help={"json": common.SELECT_HELP["json"]})
def lab_down(c, json=None):
    """Stop the lab VM and the BMC simulator (logs and keys stay in .lab/)."""
    from ..lab import services
    from ..lab import vm as labvm

    def body(report: Report):
        host = report.host("lab-vm")
        with host.step("vm-down") as s:
            s.detail = {"was_running": labvm.down()}
        with host.step("bmc-down") as s:
            s.detail = {"was_running": services.bmc_down()}
        host.message = "lab is down"

    common.execute("lab-down", body, json=json)


TASKS = [lab_up, lab_down]
