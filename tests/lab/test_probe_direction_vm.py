"""The direction of the shipped patch in the pre-registered probe scenario (docs/numa-effect-protocol.md), on a lab
VM of the protocol's shape: backplane4 with 2 CPUs per node, P = node 0 (full: a pinned hog on each CPU), S = node
2, S's free memory filled (amendment 1). Arms `off` (upstream 5.10.262) and `winner` (the shipped 0001 as a kpatch
module), BLOCKS blocks of SECONDS s windows, the main case and the source-busy control alternating block by block.

Asserted (issue 27 item 5):
- source spare: upstream made not-closer third-node moves (else the scenario did not reach the code the patch
  changes, and the test says so), and the winner's sum over the blocks is smaller than upstream's;
- source busy: neither arm makes more than BUSY_MAX not-closer moves over the blocks ("changes nothing").

Tier: lab_vm, not kernel_source. It needs the lab kernel booted in qemu and the winner's live patch built by
kpatch-build for it: the kernel_source tier has neither a VM nor kpatch-build, and the kpatch tier boots no VM.
scripts/test.sh runs lab_vm after the kernel lane, whose kpatch tier has built this very module (same inputs key),
so the `winner_module` fixture finds it unchanged after the backport's gcc-10 compile check of fair.o (~14 s in a
fresh build dir; 0.4 s once done); with no module built and the lab kernel tree and ccache warm it is ~25 s with
kpatch-build; cold, the lab kernel build, ~25 min, content-hash cached in ~/.cache/numaforge. It boots its own VM (2
CPUs per node; the session VM has 1), so it runs on the other xdist worker beside the session-VM tests
(tests/conftest.py).

The bounds come from data (docs/numa-effect-pilot.md, "The direction test", every run recorded there): in 5 runs
of this test and one traced pilot (21 upstream runs with S spare, 15 with S busy, 20 s windows), upstream made 0-5
not-closer moves per run with S spare (0 once: the load balancer had moved the probe to node 3 before NUMA
balancing acted, its pages followed, and nothing was left to do; sums over 3 blocks 6-10) and the winner 0 in
every run counted as the protocol says (1 per run in the test's first run, counted before 4c2e574; in the traced
runs such counts were the first move to node 1, miscounted); with S busy no run of either arm made more than 1
(largest sum over 3 blocks: 1), and BUSY_MAX (3 over 3 runs) is three times that. False-failure risk: the "did
not reach the code" failure needs upstream at 0 in all BLOCKS runs (about (1/21)^3 if runs are independent);
"winner < off" fails only if the winner's sum reaches upstream's (seen: 0 against 6-10); the busy bound needs a
sum four times the largest seen. A host so loaded that the guest's NUMA scanner barely runs in the window raises
the first risk; the message then says the scenario did not reach the code rather than blaming the patch.

The winner's counts above were seen when `winner` was closer-or-gain (now alternatives/closer-or-gain). The
shipped 0001 since the study is drop-zero-gain: in the study's 20 source-spare runs (60 s windows) it made 1
not-closer move in all and upstream 62 (docs/numa-effect-study.md), so the bounds hold for it with the same
margins. Since protocol amendment 6 the shipped 0001 is group-exempt, which for a task in no numa_group runs
drop-zero-gain's code; this probe was in none in any sample of amendment 6's check (docs/numa-effect-study.md),
so nothing above changes.

The second test (issue 42 item 5) generalises the first over the configuration space: one (P, S) pair per class
of the VM's topology (numaforge.measure.configs.scan_classes, derived from the SLIT and 5.10's node scan order: on
backplane4 (0, 1), (0, 2) and (2, 0)), off and winner, CLASS_BLOCKS block(s) of CLASS_SECONDS s windows, source
spare, in the same boot. In every class the winner must end the probe at least as close to its memory as upstream
(`mem_distance`: the page-weighted mean SLIT distance from the final node to the probe's pages at the last sample;
10 when all are local; the pages can follow the probe, so the distance to P alone would not say it), with a slack
of the protocol's locality margin (5 % of the pages at the topology's largest distance), and make no more
not-closer third-node moves than upstream. Issue 42 predicts that today's 0001 fails the first in the class of (2, 0): the loop's stale
distance gives the node next to the memory no credit, 0001 then drops the move upstream makes. One block per
class keeps it short (6 runs, about 4 min beside the first test's 5-6 min on the same xdist worker); its
false-failure rate is not known from data yet (docs/numa-effect-study.md, "Pilot of issue 42's prediction").
Its first run, on today's 0001 (recorded there), failed in the (2, 0) class as predicted. Since 0000 joined the
series the winner is 0000 + 0001: in the class pilots of issue 42 it passed (2, 0) and (0, 2) and left the probe
on S in (0, 1) in both runs, ending farther from its pages than upstream. It stays a non-strict expected failure
until a design that passes every class ships (one run per class can pass on 0001 by chance: in the pilot
the load balancer took 0001's probe off S, its pages following, in 2 of 5 runs).
"""

from __future__ import annotations

import pytest
from labvm import LONG_GROUP
from sshd_fixture import free_port

from numaforge import livepatch
from numaforge.inventory.model import Host, Location
from numaforge.lab import vm
from numaforge.livepatch import probe as lprobe
from numaforge.measure import arms as marms
from numaforge.measure import configs, scenario
from numaforge.remote.ssh import connect

pytestmark = [pytest.mark.lab_vm, pytest.mark.xdist_group(LONG_GROUP)]  # tests/labvm.py says why

BLOCKS = 3
SECONDS = 20
MB = 32
BUSY_MAX = 3  # per arm, summed over the BLOCKS source-busy runs
TOPOLOGY = "backplane4"
CLASS_BLOCKS = 1
CLASS_SECONDS = 20


@pytest.fixture(scope="module")
def winner_module():
    """The shipped patch's live patch for the lab kernel, through bench/numa_effect.py build's path
    (numaforge.measure.arms.build_arms: backport + kpatch-build, reused when its inputs key is unchanged)."""
    (arm,) = marms.build_arms(arms=["winner"], log=lambda m: print(m, flush=True))
    assert arm.module is not None and arm.module.is_file()
    return livepatch.load_artifact(arm.module, functions=list(arm.functions))


@pytest.fixture(scope="module")
def probe_vm(winner_module, tmp_path_factory):
    """The lab kernel on backplane4 with 2 CPUs per node (the protocol's VM), as an inventory host."""
    state, port = tmp_path_factory.mktemp("probe-direction-vm"), free_port()
    info = vm.up(kernel="lab", state_dir=state, ssh_port=port, topo=TOPOLOGY, cpus_per_node=2)
    try:
        assert info.nodes == 4
        yield Host(
            "probe-direction-vm",
            Location("tests/lab/test_probe_direction_vm.py"),
            groups=["lab"],
            ssh=vm.lab_ssh(state, port),
        )
    finally:
        vm.down(state)


def test_winner_makes_fewer_not_closer_moves_and_changes_nothing_with_the_source_busy(probe_vm, winner_module):
    params = scenario.ScenarioParams(pref=0, src=2, mb=MB, seconds=SECONDS)
    with connect(probe_vm.ssh, probe_vm.name) as r:
        assert scenario.choose_nodes(lprobe.host_topo(r)) == (0, 2)
        data = lprobe.measure_scenario(
            r, {"off": None, "winner": winner_module}, params, BLOCKS, log=lambda m: print(m, flush=True), nudge=True
        )
        assert r.run("ls /sys/kernel/livepatch | wc -l").stdout.strip() == "0"  # the switcher unloaded the module

    def per_run(case: str) -> dict[str, list[int]]:
        runs = sorted(data["cases"][case]["runs"], key=lambda x: x["round"])
        return {arm: [x["not_closer"] for x in runs if x["label"] == arm] for arm in ("off", "winner")}

    spare, busy = per_run("source spare"), per_run("source busy (control)")
    print(f"not-closer third-node moves per run: source spare {spare}, source busy {busy}")
    for counts in (*spare.values(), *busy.values()):
        assert len(counts) == BLOCKS
    assert sum(spare["off"]) > 0, (
        f"upstream made no not-closer third-node move in {BLOCKS} runs of {SECONDS} s with the source node spare: "
        f"the scenario did not reach the code the patch changes (task_numa_migrate's third-node search), so the "
        f"test measured nothing; per run {spare}"
    )
    assert sum(spare["winner"]) < sum(spare["off"]), f"the shipped patch did not reduce not-closer moves: {spare}"
    for arm, counts in busy.items():
        assert sum(counts) <= BUSY_MAX, f"{arm} made {sum(counts)} not-closer moves with the source busy: {busy}"


@pytest.mark.xfail(
    reason="issue 42: 0001 without 0000 dropped the closer move in the (2, 0) class (docs/numa-effect-study.md, "
    "'Pilot of issue 42's prediction'); with 0000 the series leaves the probe on a full S next to its memory, 0 % "
    "local, in the (0, 1) class ('Class pilots of issue 42'); remove this mark with a design that passes every class",
    strict=False,
)
def test_in_every_configuration_class_the_winner_ends_no_farther_and_adds_no_not_closer_move(probe_vm, winner_module):
    t = vm.TOPOLOGIES[TOPOLOGY]
    pairs = [c.rep for c in configs.scan_classes(t.distances, t.cpus)]
    params = scenario.ScenarioParams(mb=MB, seconds=CLASS_SECONDS)
    with connect(probe_vm.ssh, probe_vm.name) as r:
        topo = lprobe.host_topo(r)
        assert configs.from_topo(topo) == ([list(row) for row in t.distances], list(t.scaled(2).cpus))
        data = lprobe.measure_scenario(
            r,
            {"off": None, "winner": winner_module},
            params,
            CLASS_BLOCKS,
            control=False,
            log=lambda m: print(m, flush=True),
            nudge=True,
            pairs=pairs,
        )
        assert r.run("ls /sys/kernel/livepatch | wc -l").stdout.strip() == "0"

    # the protocol's locality margin (percentage points) as pages at the largest distance instead of local
    slack = scenario.MARGINS["local_share_30s"][1] / 100 * (max(map(max, t.distances)) - 10)
    seen, failed, moved = [], [], 0
    for p, s in pairs:
        runs = data["cases"][scenario.pair_case(p, s)]["runs"]
        by_arm = {arm: [x for x in runs if x["label"] == arm] for arm in ("off", "winner")}
        assert all(len(v) == CLASS_BLOCKS for v in by_arm.values()), (p, s, by_arm)
        dist = {a: [x["mem_distance"] for x in v] for a, v in by_arm.items()}
        not_closer = {a: sum(x["not_closer"] for x in v) for a, v in by_arm.items()}
        ends = {a: [x["final_node"] for x in v] for a, v in by_arm.items()}
        local = {a: [x["local_share_30s"] for x in v] for a, v in by_arm.items()}
        moved += sum(x["moves"] for x in by_arm["off"])
        line = (
            f"P={p} S={s}: final node {ends} (mean distance to its pages {dist}), not-closer moves {not_closer}, "
            f"local (last 30 s) {local}"
        )
        seen.append(line)
        if None in dist["off"] + dist["winner"]:
            failed.append(f"{line}: a run's final node is unknown")
        elif sum(dist["winner"]) > sum(dist["off"]) + slack * CLASS_BLOCKS:
            failed.append(f"{line}: the winner ended farther from the memory than upstream")
        if not_closer["winner"] > not_closer["off"]:
            failed.append(f"{line}: the winner made not-closer moves upstream did not")
    print("\n".join(seen))
    assert moved > 0, (
        "upstream made no NUMA move in any class: the scenario did not reach task_numa_migrate(), so the test "
        "measured nothing\n" + "\n".join(seen)
    )
    assert not failed, "\n".join(failed)
