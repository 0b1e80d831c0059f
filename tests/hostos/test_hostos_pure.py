"""Host OS pipeline, pure parts: parsers on captured corpora, profiles, plan (all problems at once), scripts, gate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from numaforge.bios.errors import ProfileError
from numaforge.hostos.apply import apply_script, rollback_script
from numaforge.hostos.plan import (IRQBALANCE_DEFAULTS, MANAGED_FILES, STATE_FILE, HostPlanError, irqbalance_defaults,
                                   make_plan)
from numaforge.hostos.profile import profile_facts, render_profile
from numaforge.hostos.read import (bracketed, host_state, parse_interrupts, parse_snapshot, snapshot_request,
                                   snapshot_script)
from numaforge.hostos.run import OsOptions, gate_verdict, locality_counters, locality_share, resolve_profile
from numaforge.inventory.loader import load_inventory
from numaforge.paths import ROOT

from .helpers import build_tree, corpus, lab_like_host

SYSCTLS = ["vm.zone_reclaim_mode", "kernel.numa_balancing", "vm.swappiness"]


def _state(name, devices, sysctls=SYSCTLS):
    return host_state(parse_snapshot(corpus(name)), sysctls, devices, MANAGED_FILES)


def test_lab_vm_corpus():
    st = _state("lab-vm", ["0000:00:02.0"])
    assert st.sysctls == {"vm.zone_reclaim_mode": "0", "kernel.numa_balancing": "1", "vm.swappiness": "60"}
    assert st.nodes == {0: [0], 1: [1], 2: [2], 3: [3]}
    dev = st.devices["0000:00:02.0"]
    assert (dev.numa_node, dev.local_cpus, dev.irqs, dev.pci_class) == (-1, [0, 1, 2, 3], ["10"], "0x020000")
    assert st.interrupts["10"].name == "eth0" and st.interrupts["10"].chip == "IO-APIC"
    assert st.affinity["10"] == [0]
    assert st.thp == {} and st.governors == {}            # the lab kernel: no THP, no cpufreq
    assert st.numastat[2]["local_node"] == 2387 and st.vmstat["numa_hint_faults"] == 0
    assert all(v is None for v in st.files.values()) and not st.unit_linked


def test_lab_vm_numa_nic_corpus():
    st = _state("lab-vm-numanic", ["0000:00:02.0", "0000:21:04.0"])
    nic = st.devices["0000:21:04.0"]                  # virtio-net behind qemu's pxb with numa_node=1
    assert (nic.numa_node, nic.local_cpus, nic.irqs) == (1, [1], ["29", "30", "31"])
    assert st.interrupts["29"].chip == "PCI-MSI" and "virtio" in st.interrupts["29"].name


def test_buildserver_corpus():
    st = _state("buildserver", ["0000:00:03.0"])
    assert st.thp["enabled"] == ("madvise", ["always", "madvise", "never"])
    assert st.thp["defrag"][0] == "madvise"
    dev = st.devices["0000:00:03.0"]
    assert dev.irqs == ["37", "38", "39"] and dev.numa_node == -1      # virtio-net, MSI-X
    assert st.affinity["37"] == [0, 1]
    assert st.interrupts["37"].chip.startswith("PCI-MSI")


def test_parsers_edge_cases():
    assert bracketed("[always] madvise never") == ("always", ["always", "madvise", "never"])
    ints = parse_interrupts("           CPU0       CPU1\n 10:  5  6   IO-APIC  10-fasteoi   eth0\nNMI: 0 0 Non-maskable\n")
    assert list(ints) == ["10"] and ints["10"].counts == [5, 6] and ints["10"].name == "eth0"
    snap = parse_snapshot("@@@ file /a\nx\n\n@@@ ls /d\n1\n2\n@@@ file /b\ny\n\n")
    assert snap.files == {"/a": "x", "/b": "y"} and snap.dirs == {"/d": ["1", "2"]}
    with pytest.raises(ValueError, match="smp_affinity_list"):
        host_state(parse_snapshot("@@@ file /proc/irq/3/smp_affinity_list\n3-1\n\n"))


def test_snapshot_script_runs_under_a_root_prefix(tmp_path):
    """The real script under sh, over a tree built from the lab VM capture: the same state comes back."""
    root = build_tree(tmp_path / "root")
    r = subprocess.run(["sh", "-c", snapshot_script(str(root), ["/proc/sys/vm/swappiness", "/proc/irq/[0-9]*/smp_affinity_list"],
                                                    ["/sys/bus/pci/devices/0000:00:02.0/msi_irqs"])],
                       capture_output=True, text=True, check=True)
    snap = parse_snapshot(r.stdout)
    assert snap.files["/proc/sys/vm/swappiness"] == "60" and snap.files["/proc/irq/10/smp_affinity_list"] == "0"


def _profile(name="lab-vm-host", **kw):
    return render_profile(name, profile_facts(lab_like_host(**kw)))


def test_profiles_render_with_extends():
    p = _profile()
    assert p.sysctl == {"vm.zone_reclaim_mode": "0", "kernel.numa_balancing": "1", "vm.swappiness": "10"}
    assert p.thp == {} and p.governor is None and p.irq_devices == ["0000:21:04.0"] and p.irq_cpus == "local"
    base = render_profile("epyc-gpudirect-host", profile_facts(lab_like_host()))
    assert base.thp == {"enabled": "madvise", "defrag": "defer+madvise"} and base.governor == "performance"


@pytest.mark.parametrize("text, match", [
    ("sysctl:\n  vm.zone_reclaim_mode: 0\n  vm.zone_reclaim_mode: 1\n", "duplicate key"),
    ("sysctl:\n  'Vm zone': 1\n", "sysctl"),
    ("thp:\n  enabled: sometimes\n", "allowed values: 'always', 'madvise', 'never'"),
    ("sysctls:\n  vm.x: 1\n", "did you mean 'sysctl'"),
    ("irq:\n  devices: ['41:00.0']\n", "must match"),
    ("description: {{ nope }}\n", "undefined value"),
    ("description: {{ ''.__class__.__mro__ }}\n", "template sandbox forbids"),   # the sandbox refuses it
])
def test_bad_profiles_are_clear_errors(tmp_path, text, match):
    p = tmp_path / "bad.yaml.j2"
    p.write_text(text)
    with pytest.raises(ProfileError, match=match) as exc:
        render_profile(str(p), profile_facts(lab_like_host()))
    assert str(p) in exc.value.render()


@pytest.mark.parametrize("text, where", [
    ("sysctl:\n  vm.swappiness: 1\n  vm.swappiness: 2\n", "rendered line 3: 'vm.swappiness: 2'"),
    ("description: x\nsysctls:\n  vm.x: 1\n", ":2"),
    ("description: x\nthp:\n  enabled: sometimes\n", "rendered line 3"),
    ("description: x\n\n{{ nope }}\n", ":3"),
])
def test_host_profile_errors_name_the_line(tmp_path, text, where):
    """Host profiles parse through numaforge.yamlsrc like BIOS profiles: every error keeps its line."""
    p = tmp_path / "bad.yaml.j2"
    p.write_text(text)
    with pytest.raises(ProfileError) as exc:
        render_profile(str(p), profile_facts(lab_like_host()))
    assert exc.value.where.startswith(str(p)) and where in exc.value.where, exc.value.render()


def test_plan_reports_every_problem_at_once(tmp_path):
    p = tmp_path / "many.yaml.j2"
    p.write_text("sysctl:\n  vm.zone_reclaim_mod: 0\n  kernel.no_such_thing: 1\nthp:\n  enabled: never\n"
                 "cpufreq_governor: performance\nirq:\n  devices: ['0000:00:09.0']\n")
    prof = render_profile(str(p), profile_facts(lab_like_host()))
    st = host_state(parse_snapshot(corpus("lab-vm")), list(prof.sysctl), prof.irq_devices, MANAGED_FILES)
    with pytest.raises(HostPlanError) as exc:
        make_plan(prof, st, host="lab")
    text = exc.value.render()
    assert len(exc.value.problems) == 5
    assert "did you mean vm.zone_reclaim_mode?" in text and "kernel.no_such_thing: unknown" in text
    assert "CONFIG_TRANSPARENT_HUGEPAGE" in text and "no cpufreq" in text and "no such PCI device" in text
    assert "set thp.enabled: null in the profile" in text and "thp.{k}" not in text     # the real key (issue 24)


def test_plan_diff_and_device_checks():
    prof = _profile()
    st = _state("lab-vm-numanic", ["0000:21:04.0"], list(prof.sysctl))
    plan = make_plan(prof, st, host="lab")
    by = {(i.kind, i.name): i for i in plan.items}
    assert by[("sysctl", "vm.swappiness")].action == "change" and by[("sysctl", "vm.zone_reclaim_mode")].action == "ok"
    assert {n: (i.current, i.desired) for (k, n), i in by.items() if k == "irq"} == {
        "29 (0000:21:04.0)": ("1", "1"), "30 (0000:21:04.0)": ("0-3", "1"), "31 (0000:21:04.0)": ("0-3", "1")}
    assert {c.name: c.verdict for c in plan.checks} == {"numa-nodes": "ok", "numa_node 0000:21:04.0": "ok"}
    # the e1000 on qemu's main root reports -1 on a 4-node machine: a failed check with the likely BIOS cause
    e1000 = _profile(nics=("0000:00:02.0",))
    st = _state("lab-vm", ["0000:00:02.0"], list(e1000.sysctl))
    checks = {c.name: c for c in make_plan(e1000, st).checks}
    bad = checks["numa_node 0000:00:02.0"]
    assert bad.verdict == "fail" and "-1" in bad.evidence and "likely BIOS cause" in bad.why
    assert "--numa-node-override" in bad.why
    # without checks.nodes the count comes from sockets x the BIOS NPS: NPS 4 on 4 sockets is not what qemu shows
    e1000.nodes = None
    assert {c.name: c for c in make_plan(e1000, st, nps=4, sockets=4).checks}["numa-nodes"].verdict == "fail"


def test_apply_script_saves_first_and_second_apply_is_empty(tmp_path):
    """Run the real apply script with sh over a captured tree: values and files land, the previous values are
    saved before anything else, a re-plan is all ok (nothing to write), and the rollback script restores."""
    root = build_tree(tmp_path / "root")
    prof = _profile()

    def state():
        r = subprocess.run(["sh", "-c", snapshot_script(str(root), *_req(prof))], capture_output=True, text=True)
        return host_state(parse_snapshot(r.stdout), list(prof.sysctl), prof.irq_devices, MANAGED_FILES)

    st = state()
    script = apply_script(make_plan(prof, st), st, str(root), real_root=False)
    assert script.index("previous.json") < script.index("w 10 /proc/sys/vm/swappiness")
    subprocess.run(["sh", "-c", script], check=True)
    assert (root / "proc/sys/vm/swappiness").read_text() == "10"
    assert (root / "proc/irq/30/smp_affinity_list").read_text() == "1"
    saved = json.loads((root / STATE_FILE.lstrip("/")).read_text())
    assert saved["values"]["/proc/sys/vm/swappiness"] == "60"
    st2 = state()
    plan2 = make_plan(prof, st2)
    assert plan2.changes == [] and apply_script(plan2, st2, str(root), real_root=False) is None
    rb, _ = rollback_script(st2, str(root), real_root=False)
    (root / "proc/irq/31/smp_affinity_list").unlink()           # renumbered by a reboot: the rest still comes back
    r = subprocess.run(["sh", "-c", rb], capture_output=True, text=True, check=True)
    assert "/proc/irq/31/smp_affinity_list no longer exists" in r.stderr
    assert (root / "proc/sys/vm/swappiness").read_text() == "60"
    assert not (root / "etc/sysctl.d/60-numaforge-hostos.conf").exists()
    assert not (root / STATE_FILE.lstrip("/")).exists()


def _req(prof):
    return snapshot_request(list(prof.sysctl), prof.irq_devices, MANAGED_FILES)


def test_irqbalance_block_keeps_user_args():
    mine = irqbalance_defaults('# comment\nIRQBALANCE_ARGS="--deepestcache=2"\n')
    assert 'IRQBALANCE_ARGS="--deepestcache=2 --policyscript=/etc/numaforge/irqbalance-policy.sh"' in mine
    assert irqbalance_defaults(mine) == mine                      # idempotent
    assert mine.startswith('# comment\nIRQBALANCE_ARGS="--deepestcache=2"\n')
    assert IRQBALANCE_DEFAULTS == "/etc/default/irqbalance"


def test_locality_gate():
    a = {"local_node": 1000, "other_node": 0, "hint_faults": 0, "hint_faults_local": 0}
    b = {"local_node": 1900, "other_node": 100, "hint_faults": 4, "hint_faults_local": 1}
    c = {"local_node": 2600, "other_node": 400, "hint_faults": 8, "hint_faults_local": 0}
    before, after = locality_share(a, b), locality_share(b, c)
    assert before["alloc_local_share"] == 0.9 and after["alloc_local_share"] == 0.7
    ok, text, _ = gate_verdict(before, after, 0.02)
    assert not ok and "WORSE" in text and "90.0% -> 70.0%" in text
    assert "hint faults" not in text                       # 4 hint faults per window: too few to judge
    assert gate_verdict(before, after, 0.25)[0]
    few = locality_share(a, {**a, "local_node": 1050})
    ok, text, _ = gate_verdict(few, after, 0.02)
    assert not ok and "cannot tell: fewer than 100" in text
    st = host_state(parse_snapshot(corpus("lab-vm")))
    assert locality_counters(st)["local_node"] == 583 + 228 + 2387 + 1594


def _cli(tmp_path, *args, profile_text=None):
    inv = tmp_path / "inv.yaml"
    inv.write_text("version: 1\nhosts:\n  h1:\n    ssh: {address: 127.0.0.1, port: 1, agent: false}\n"
                   "    vars: {hostos_profile: lab-vm-host}\n")
    root = Path(__file__).resolve().parents[2]
    return subprocess.run([str(Path(sys.executable).with_name("invoke")), *args, "-i", str(inv)], cwd=root,
                          capture_output=True, text=True, timeout=120)


def test_cli_bad_profile_is_a_clear_error_before_any_connection(tmp_path):
    bad = tmp_path / "bad.yaml.j2"
    bad.write_text("sysctl:\n  vm.swappiness: 10\n  vm.swappiness: 20\n")
    r = _cli(tmp_path, "os-apply", "--profile", str(bad), "--json", str(tmp_path / "r.json"))
    out = json.loads((tmp_path / "r.json").read_text())["hosts"][0]["message"]
    assert r.returncode == 1 and "duplicate key 'vm.swappiness'" in out and str(bad) in out
    assert "refused" not in out                                # the profile fails before SSH is tried
    r = _cli(tmp_path, "os-apply", "--gate", "locality")
    assert r.returncode != 0 and "--canary" in r.stdout + r.stderr
    r = _cli(tmp_path, "os-apply", "--numa-node-override", "0000:21:04.0")
    assert r.returncode != 0 and "ADDR=NODE" in r.stdout + r.stderr
    r = _cli(tmp_path, "os-apply", "--canary", "1", "--gate", "locality", "--gate-threshold", "5")
    assert r.returncode != 0 and "--gate-threshold must be a number from 0 to 1" in r.stdout + r.stderr


def test_the_lab_inventory_names_its_host_os_profile():
    """The lab default covers all three pipelines (issue 24): `os-apply` on the lab VM needs no --profile."""
    host = load_inventory(ROOT / "inventory" / "lab.yaml").hosts["lab-vm"]
    assert host.vars["hostos_profile"] == "lab-vm-host" and host.bios_profile and host.kernel.target == "lab"
    prof = resolve_profile(host, OsOptions())
    assert prof.sysctl["vm.swappiness"] == "10" and prof.thp == {}
