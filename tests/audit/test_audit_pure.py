"""numa-audit's pure parsers and rules over the constructed 5.10 captures in tests/data/audit (README there)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from numaforge.audit import parse, rules
from numaforge.audit.run import ETHTOOL, AuditInput, audit_script, findings_of, parse_audit
from numaforge.cli import audit as cli_audit
from numaforge.cli import common
from numaforge.cli.audit import _window
from numaforge.errors import NumaforgeError
from numaforge.hostos.read import Snapshot, parse_interrupts
from numaforge.report import HostResult, Report

DATA = Path(__file__).resolve().parents[1] / "data" / "audit"


def tree(d: Path) -> Snapshot:
    """A captured tree as the snapshot script would have printed it (ethtool/IFACE = `ethtool -S IFACE`)."""
    files = {}
    for p in sorted(d.rglob("*")):
        if p.is_file():
            rel = p.relative_to(d).as_posix()
            key = ETHTOOL + rel.split("/", 1)[1] if rel.startswith("ethtool/") else "/" + rel
            files[key] = p.read_text().removesuffix("\n")
    return Snapshot(files)


def scenario(name: str) -> AuditInput:
    return AuditInput(tree(DATA / name / "once"), [tree(DATA / name / "sample1"), tree(DATA / name / "sample2")])


def by_check(findings, check, severity=None):
    return [f for f in findings if f.check == check and (severity is None or f.severity == severity)]


# --------------------------------------------------------------------------------------------- parsers
def test_sched_debug_reads_root_cfs_rq_not_task_groups():
    sd = parse.parse_sched_debug((DATA / "faulty/sample1/proc/sched_debug").read_text())
    assert sd.version.startswith("v0.11, 5.10.0-28-amd64")
    assert sd.cpu_nr_running == {0: 4, 1: 4, 2: 0, 3: 0}
    # the autogroup cfs_rq before the root one says spread 99 / nr_running 0: it must not leak in
    assert sd.cpus[0].spread_ms == 30.0 and sd.cpus[0].nr_running == 4 and sd.cpus[0].nr_spread_over == 40
    assert sd.cpus[0].load_avg == 4096


def test_sched_debug_eevdf_has_no_nr_spread_over():
    sd = parse.parse_sched_debug((DATA / "eevdf-6.6/proc/sched_debug").read_text())
    assert all(rq.nr_spread_over is None for rq in sd.cpus.values())
    assert sd.cpus[0].spread_ms == 4.0


def test_sched_debug_rejects_other_files():
    with pytest.raises(ValueError, match="Sched Debug Version"):
        parse.parse_sched_debug("cpu  1 2 3\n")


def test_schedstat_sums_lb_counters():
    st = parse.parse_schedstat((DATA / "faulty/sample2/proc/schedstat").read_text())
    assert st.version == 15 and st.lb_count == 4 * 1200 and st.lb_failed == 4 * 1000 and st.lb_imbalance == 4 * 2000


def test_softnet_5_10_has_eleven_hex_columns():
    sn = parse.parse_softnet((DATA / "faulty/sample2/proc/net/softnet_stat").read_text())
    assert sorted(sn) == [0, 1, 2, 3]
    assert (sn[0].dropped, sn[0].time_squeeze) == (0x28, 0x1E)


def test_status_and_numa_maps():
    st = parse.parse_status(4242, (DATA / "faulty/once/proc/4242/status").read_text())
    assert (st.name, st.cpus, st.mems) == ("membench", [0, 1], [0, 1])
    vmas = parse.parse_numa_maps((DATA / "faulty/once/proc/4343/numa_maps").read_text())
    assert [v.policy for v in vmas] == ["default", "bind:1", "default"]
    assert vmas[1].pages == {1: 9000} and vmas[0].path == "/usr/bin/membench"


def test_ethtool_stats():
    s = parse.parse_ethtool_stats((DATA / "faulty/sample2/ethtool/eth0").read_text())
    assert s["rx_missed_errors"] == 900 and s["rx_no_buffer_count"] == 450


# --------------------------------------------------------------------------------------------- rules
def test_faulty_host_finds_each_planted_fault_with_evidence_and_fix():
    findings, facts = findings_of(scenario("faulty"), window=10)
    assert facts["kernel"] == "5.10.0-28-amd64" and facts["sched_debug"] == "/proc/sched_debug"
    # 2.2 node imbalance, spread within a runqueue, nr_spread_over growth 30 > 15 over 10 s
    node = [f for f in by_check(findings, "sched-imbalance", "warn") if f.what.startswith("node 0")]
    assert node and "node0=4.0/cpu" in node[0].evidence[0] and node[0].fix
    spread = [f for f in findings if f.what.startswith("cpu0: vruntime spread 30.0 ms")]
    assert spread and spread[0].severity == "warn"
    grew = [f for f in findings if "nr_spread_over grew by 30" in f.what]
    assert grew and grew[0].severity == "warn" and "40 -> 70" in grew[0].evidence[0]
    assert not [f for f in findings if f.what.startswith("cpu1: nr_spread_over")]  # grew by 2: healthy
    assert by_check(findings, "sched-imbalance", "warn")[-1].evidence[0].startswith("/proc/schedstat")
    # 2.3 membench on node 0, 99.8 % of its anonymous pages on node 1 (the 4 file pages of its binary not counted)
    mem = [f for f in by_check(findings, "cpuset-membind", "warn") if "membench (4242)" in f.what]
    assert mem and "numactl --cpunodebind=0 --membind=0" in mem[0].fix
    assert "cgroup /system.slice/membench.service: cpuset.mems=0" in mem[0].fix
    assert mem[0].evidence[2] == (
        "/sys/fs/cgroup/system.slice/membench.service/cpuset.cpus.effective: 0-3; "
        "/sys/fs/cgroup/system.slice/membench.service/cpuset.mems.effective: 0-1"
    )
    assert "N0=103, N1=65000" in mem[0].evidence[1] and mem[0].evidence[1].startswith("/proc/4242/numa_maps")
    bound = [f for f in findings if "bound VMA" in f.what]
    assert bound and "7f3a40000000 bind:1" in bound[0].evidence[0]
    # 2.4 virtio2's queues all on cpu0, softnet drops, NIC missed
    irq = [f for f in by_check(findings, "irq-placement", "warn") if f.what.startswith("virtio2:")]
    assert irq and "4 of its 4 IRQs are pinned to cpu0 alone" in irq[0].what and "cpu0=20000" in irq[0].evidence[0]
    assert "/proc/irq/25/smp_affinity_list: 0" in irq[0].evidence
    assert [f for f in findings if "softnet backlog dropped 40" in f.what]
    assert [f for f in findings if f.what.startswith("eth0:") and "rx_missed_errors +900" in f.evidence[0]]
    # 2.5
    zr = by_check(findings, "zone-reclaim", "warn")
    assert zr and zr[0].fix == "os-apply sysctl vm.zone_reclaim_mode: 0"
    assert rules.status(findings)[0] == "failed"


def test_clean_host_has_no_findings():
    findings, _facts = findings_of(scenario("clean"), window=10)
    assert findings == []
    assert rules.status(findings) == ("ok", "no findings")


def test_short_window_does_not_call_spread_over_growth_sustained():
    findings, _ = findings_of(scenario("faulty"), window=2)
    grew = [f for f in findings if "nr_spread_over grew" in f.what]
    assert grew and grew[0].severity == "info"


def test_process_pattern_limits_the_cpuset_check():
    findings, _ = findings_of(scenario("faulty"), window=10, process="bound")
    assert not [f for f in findings if "membench" in f.what]
    assert [f for f in findings if "bound (4343)" in f.what]


def test_no_sched_debug_says_not_available_on_5_10():
    data = scenario("clean")
    for s in data.samples:
        del s.files["/proc/sched_debug"]
        del s.files["/proc/schedstat"]
    findings, _ = findings_of(data, window=10)
    na = [f.what for f in findings]
    assert (
        "not available on this kernel: no /proc/sched_debug (kernel built without CONFIG_SCHED_DEBUG, or not readable)"
        in na
    )
    assert "not available on this kernel: no /proc/schedstat (CONFIG_SCHEDSTATS off)" in na
    assert all(f.severity == "info" for f in findings) and rules.status(findings)[0] == "ok"


def test_debugfs_location_and_eevdf_on_6_6():
    eevdf = tree(DATA / "eevdf-6.6")
    data = scenario("clean")
    data.once.files["/proc/sys/kernel/osrelease"] = eevdf.files["/proc/sys/kernel/osrelease"]
    for s in data.samples:
        del s.files["/proc/sched_debug"]
        s.files["/sys/kernel/debug/sched/debug"] = eevdf.files["/proc/sched_debug"]
    findings, facts = findings_of(data, window=10)
    assert facts["sched_debug"] == "/sys/kernel/debug/sched/debug"
    assert [f.what for f in findings] == ["not available on this kernel: no nr_spread_over (EEVDF scheduler, 6.6+)"]
    for s in data.samples:
        del s.files["/sys/kernel/debug/sched/debug"]
    findings, _ = findings_of(data, window=10)
    assert "debugfs not mounted" in findings[0].what


def test_irq_off_local_cpus():
    a = parse_interrupts((DATA / "clean/sample1/proc/interrupts").read_text())
    b = parse_interrupts((DATA / "clean/sample2/proc/interrupts").read_text())
    # clean: queue 0 on cpu0, queue 1 on cpu1 -- a device local to node 1 (cpus 2-3) has them all off-node
    found = rules.irq_placement(a, b, 10, {"virtio2": [2, 3]}, 4)
    assert len(found) == 1 and "100% of 20000 interrupts handled off its local CPUs 2,3" in found[0].what
    assert rules.irq_placement(a, b, 10, {"virtio2": [0, 1]}, 4) == []


def test_irq_counts_judge_when_affinity_is_unreadable():
    a = parse_interrupts((DATA / "faulty/sample1/proc/interrupts").read_text())
    b = parse_interrupts((DATA / "faulty/sample2/proc/interrupts").read_text())
    found = rules.irq_placement(a, b, 10, {}, 4, affinity={})
    assert [f.what for f in found] == ["virtio2: 100% of 20000 interrupts of its 4 IRQs on cpu0"]
    # queues pinned one per CPU are spread, not forced
    assert rules.irq_placement(a, b, 10, {}, 4, affinity={"25": [0], "26": [1], "27": [2], "28": [3]}) == []
    assert rules.irq_placement(a, b, 10, {}, 1, affinity={}) == []  # one CPU: nowhere else to go


def test_device_numa_node_minus_one_and_thp_governor():
    data = scenario("clean")
    data.once.files["/sys/bus/pci/devices/0000:00:03.0/numa_node"] = "-1"
    data.once.files["/sys/kernel/mm/transparent_hugepage/defrag"] = "[always] defer defer+madvise madvise never"
    data.once.files["/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"] = "powersave"
    findings, _ = findings_of(data, window=10)
    assert [(f.check, f.severity) for f in findings] == [("device-node", "warn"), ("thp", "info"), ("governor", "info")]
    assert findings[0].evidence == ["/sys/bus/pci/devices/0000:00:03.0/numa_node: -1"]


def test_audit_script_output_round_trips_through_parse_audit(tmp_path):
    root = tmp_path / "root"
    for part in ("once", "sample1"):
        for p in (DATA / "faulty" / part).rglob("*"):
            if p.is_file() and not p.relative_to(DATA / "faulty" / part).as_posix().startswith("ethtool"):
                dst = root / p.relative_to(DATA / "faulty" / part)
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_text(p.read_text())
    out = subprocess.run(["sh", "-s"], input=audit_script(str(root), 0.1), capture_output=True, text=True, check=True)
    data = parse_audit(out.stdout)
    assert data.once.files["/proc/4242/status"].startswith("Name:\tmembench")
    assert data.samples[0].files["/proc/sched_debug"] == data.samples[1].files["/proc/sched_debug"]
    assert "/proc/schedstat" in data.samples[1].files
    # the cgroup of /proc/4242/cpuset, read by the script's own loop
    assert data.once.files["/sys/fs/cgroup/system.slice/membench.service/cpuset.mems.effective"] == "0-1"


def test_parse_audit_needs_two_samples():
    with pytest.raises(ValueError, match="expected 2 samples"):
        parse_audit("@@@ file /proc/x\n1\n@@@ sample 1\n")


@pytest.mark.parametrize(
    "path, text",
    [
        ("/proc/sched_debug", "cpu#0\n"),
        ("/proc/schedstat", "version 15\ndomain0 3 " + "x " * 36 + "\n"),
        ("/proc/net/softnet_stat", "zz 00 00\n"),
    ],
)
def test_unparseable_kernel_file_names_the_file(path, text):
    data = scenario("clean")
    data.samples[1].files[path] = text
    with pytest.raises(ValueError, match=f"^{path}: "):
        findings_of(data, window=10)


def test_window_option_is_checked():
    assert _window(None) == 10.0 and _window("2.5") == 2.5
    for bad in ("0", "ten", "601"):
        with pytest.raises(NumaforgeError, match="--window"):
            _window(bad)


def test_devices_sharing_a_root_port():
    links = parse.parse_pci_links((DATA / "pci-ls-l.txt").read_text())
    assert links["0000:41:00.1"] == ("pci0000:40", "0000:40:01.1")
    assert links["0000:40:01.1"] == ("pci0000:40", None) and links["0000:00:00.0"] == ("pci0000:00", None)
    classes = {
        "0000:41:00.0": "0x020000",
        "0000:41:00.1": "0x020000",
        "0000:45:00.0": "0x030200",
        "0000:46:00.0": "0x010802",
        "0000:42:00.0": "0x060400",
    }
    devs = [
        parse.PciPlacement(a, port, rc, classes.get(a, "0x060400"), "16.0 GT/s PCIe x16")
        for a, (rc, port) in links.items()
    ]
    found = rules.shared_root_ports(devs)
    # the NIC's two functions are one device; the GPU and the NVMe drive share 40:03.1
    assert len(found) == 1 and found[0].severity == "info"
    assert found[0].what.startswith("2 devices share root port 0000:40:03.1 (GPU 0000:45:00.0, NVMe 0000:46:00.0)")
    assert (
        "/sys/bus/pci/devices/0000:46:00.0: below pci0000:40/0000:40:03.1, link 16.0 GT/s PCIe x16" in found[0].evidence
    )


def test_virtio_irqs_off_the_local_cpus_of_their_pci_device():
    data = scenario("clean")
    data.once.dirs["/sys/bus/pci/devices/0000:00:03.0/msi_irqs"] = ["24", "25", "26", "27", "28"]
    data.once.files["/sys/bus/pci/devices/0000:00:03.0/local_cpulist"] = "2-3"
    findings, _ = findings_of(data, window=10)
    assert [f.what for f in findings] == ["virtio2: 100% of 20000 interrupts handled off its local CPUs 2,3"]
    data.once.files["/sys/bus/pci/devices/0000:00:03.0/local_cpulist"] = "0-1"
    data.once.files["/sys/bus/pci/devices/0000:00:03.0/numa_node"] = "0"
    assert findings_of(data, window=10)[0] == []


def test_node_layout_against_the_bios_nps_and_device_local_cpus():
    data = scenario("clean")
    assert findings_of(data, window=10, nps=1, sockets=2)[0] == []  # 2 nodes = 2 sockets x NPS 1
    found, _ = findings_of(data, window=10, nps=4, sockets=2)
    assert [f.what for f in found] == ["2 NUMA nodes online, the BIOS profile means 8 (2 socket(s) x NPS 4)"]
    assert "bios-apply" in found[0].fix
    data.once.files["/sys/bus/pci/devices/0000:00:03.0/local_cpulist"] = "0-1"  # node 1 says the file, CPUs of node 0
    data.once.files["/sys/bus/pci/devices/0000:00:02.0/numa_node"] = "3"
    found, _ = findings_of(data, window=10)
    assert [f.what for f in found] == [
        "0000:00:02.0: numa_node 3 is not an online node (online: 0,1)",
        "0000:00:03.0: numa_node 1 but its local CPUs 0,1 are not node 1's 2,3",
    ]


def test_no_device_with_a_node_is_one_note_not_a_warning_per_device():
    data = scenario("clean")
    for a in ("0000:00:02.0", "0000:00:03.0"):
        data.once.files[f"/sys/bus/pci/devices/{a}/numa_node"] = "-1"
    found, _ = findings_of(data, window=10)
    assert [(f.check, f.severity) for f in found] == [("device-node", "info")]
    assert found[0].what.startswith("no PCI device reports a NUMA node (2 devices say -1)")
    assert rules.status(found) == ("ok", "1 info")


def test_printed_tables_show_host_text_literally(capsys):
    """A process name is the host's data: rich markup in it is shown, not interpreted."""
    finding = rules.Finding(
        "cpuset-membind", "warn", "[bold red]evil[/] (4242) runs on node(s) 0", ["/proc/4242/status: [x]"], "fix [y]"
    )
    report = Report(
        "numa-audit",
        hosts=[
            HostResult("h[1]", "failed", data={"findings": [finding.as_dict()], "kernel": "5.10"}),
            HostResult("h2", "ok", data={"findings": [], "kernel": "5.10"}),
        ],
    )
    mode = common.console.mode
    common.console.configure("plain")
    try:
        cli_audit._print(report)
    finally:
        common.console.configure(mode)
    out = capsys.readouterr().out
    assert "[bold red]evil[/] (4242)" in out and "/proc/4242/status: [x]" in out and "fix [y]" in out
    assert "h[1]: numa-audit (kernel 5.10)" in out and "h2: no findings (kernel 5.10)" in out
    assert "fleet summary" in out and "cpuset-membind" in out


LAB_VM_INTERRUPTS = """\
           CPU0       CPU1       CPU2       CPU3
  1:          9          0          0          0   IO-APIC   1-edge      i8042
 10:        538          0          0          0   IO-APIC  10-fasteoi   eth1
 12:          3          0          0          0   IO-APIC  12-edge      i8042
 24:          0          0          0          0   PCI-MSI 17367040-edge      virtio0-config
 25:          0          0          0          0   PCI-MSI 17367041-edge      virtio0-input.0
 26:          0          0          0          0   PCI-MSI 17367042-edge      virtio0-output.0
"""


def test_legacy_isa_irqs_on_one_cpu_are_a_note_virtio_queues_a_warning():
    """The lab VM's /proc/interrupts as booted (i8042's keyboard and aux IRQs pinned to cpu0 by the platform) and
    with the virtio NIC's MSI-X IRQs forced onto cpu3."""
    ints = parse_interrupts(LAB_VM_INTERRUPTS)
    pinned = {"1": [0], "12": [0], "10": [0], "24": [3], "25": [3], "26": [3]}
    found = rules.irq_placement(ints, ints, 10, {"virtio0": [1]}, 4, affinity=pinned)
    by = {f.what.split(":")[0]: f for f in found}
    assert by["i8042"].severity == "info" and "legacy ISA IRQs 1,12 (IO-APIC)" in by["i8042"].what
    assert by["virtio0"].severity == "warn" and "3 of its 3 IRQs are pinned to cpu3" in by["virtio0"].what
    assert "/proc/irq/25/smp_affinity_list: 3" in by["virtio0"].evidence
    clean = rules.irq_placement(ints, ints, 10, {}, 4, affinity={**pinned, "24": [1], "25": [0, 1, 2, 3], "26": [1, 2]})
    assert [f.severity for f in clean] == ["info"]


@pytest.mark.parametrize("value", ["on", "1garbage", "-1", "0x1", "1.0", "", " ", "\x1b[2J", "9" * 40, "١"])
def test_a_zone_reclaim_mode_that_is_not_a_number_is_cannot_tell_never_reclaim_on(value):
    """Peer data is validated (issue 40 item 5): the kernel prints a non-negative int; anything else is
    "cannot tell" (a warn: the host is not ok), never read as zone reclaim on or off."""
    data = scenario("clean")
    data.once.files["/proc/sys/vm/zone_reclaim_mode"] = value
    findings, _facts = findings_of(data, window=10)
    zr = by_check(findings, "zone-reclaim")
    assert len(zr) == 1 and zr[0].severity == "warn", findings
    assert zr[0].what.startswith("cannot tell whether zone reclaim is on"), zr[0].what
    assert "drops page cache" not in zr[0].what and "\x1b" not in zr[0].what + "".join(zr[0].evidence)
    assert rules.status(findings)[0] == "failed"


@pytest.mark.parametrize(("value", "on"), [("0", False), ("1", True), ("4", True), ("7", True)])
def test_a_zone_reclaim_mode_number_is_judged(value, on):
    data = scenario("clean")
    data.once.files["/proc/sys/vm/zone_reclaim_mode"] = value
    findings, _facts = findings_of(data, window=10)
    zr = by_check(findings, "zone-reclaim")
    assert bool(zr) == on and all("drops page cache" in f.what for f in zr)
