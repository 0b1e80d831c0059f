"""The series' 0002 on a full kernel (protocol amendment 7's setup): the lab kernel with the whole series built in
(0000 + 0001 + 0002, numaforge.measure.arms.full_kernel: the lab kernel's tree, config and flags) boots in the lab VM,
lists the NUMA_PREFER_LOCAL scheduler feature on by default, and the knob control's switch (FeatureSwitcher) turns
it off and on with a read-back and puts it back as it found it; one short block of the knob control runs end to
end on it with no live patch loaded.

This is the "booted as a full kernel" check of 0002's "How tested", not its evidence: the effect of the knob is
the knob control study's (docs/numa-effect/control-knob.md, 20 blocks of 60 s), which two 10 s runs cannot show,
so nothing here asserts a direction.

Tier lab_vm; it boots its own VM (its own xdist group, tests/conftest.py). scripts/setup.d/35-kernel-caches.sh
builds the series kernel from the lab kernel's built tree (content-hash cached in ~/.cache/numaforge), so the
fixture finds it; with no cache it builds it (the series backport's compile check, then an incremental build of
the lab kernel: tests/kpatch/test_series_kernel.py checks what that build differs in).
"""

from __future__ import annotations

import pytest
from sshd_fixture import free_port

from numaforge.lab import vm
from numaforge.lab.kernels import built_kernel
from numaforge.livepatch import probe as lprobe
from numaforge.livepatch.arms import SCHED_FEATURES, FeatureSwitcher, feature_state
from numaforge.measure import arms as marms
from numaforge.measure import scenario
from numaforge.remote.ssh import connect

pytestmark = pytest.mark.lab_vm


@pytest.fixture(scope="module")
def knob_vm(tmp_path_factory):
    lk = marms.full_kernel(log=lambda m: print(m, flush=True))
    state, port = tmp_path_factory.mktemp("knob-vm"), free_port()
    vm.up(kernel=built_kernel(lk, "series"), state_dir=state, ssh_port=port, topo="backplane4", cpus_per_node=1)
    try:
        yield vm.lab_ssh(state, port)
    finally:
        vm.down(state)


def features(r) -> str:
    return r.run(f"cat {SCHED_FEATURES}", timeout=30).stdout


def test_the_full_kernel_has_the_feature_on_and_the_switch_turns_it_off_and_back(knob_vm):
    with connect(knob_vm, "knob-vm") as r:
        assert feature_state(features(r), marms.FEATURE) is True  # SCHED_FEAT(NUMA_PREFER_LOCAL, true)
        sw = FeatureSwitcher(r, marms.KNOB_ARMS)
        sw.open()
        try:
            sw.set_arm("knob-off")
            assert feature_state(features(r), marms.FEATURE) is False
            assert "NO_NUMA_PREFER_LOCAL" in features(r).split()
            sw.set_arm("knob-on")
            assert feature_state(features(r), marms.FEATURE) is True
            sw.set_arm("knob-off")
        finally:
            sw.close()
        assert feature_state(features(r), marms.FEATURE) is True  # as open() found it


def test_one_block_of_the_knob_control_runs_with_no_live_patch(knob_vm):
    params = scenario.ScenarioParams(pref=0, src=2, mb=16, seconds=10)
    with connect(knob_vm, "knob-vm") as r:
        data = lprobe.measure_scenario(
            r, {}, params, 1, features=dict(marms.KNOB_ARMS), log=lambda m: print(m, flush=True)
        )
        assert r.run("ls /sys/kernel/livepatch 2>/dev/null | wc -l").stdout.strip() == "0"
        assert feature_state(features(r), marms.FEATURE) is True
    case = data["cases"][scenario.KNOB_CASE]
    assert case["arms"] == ["knob-off", "knob-on"] and case["base"] == "knob-off"
    assert data["features"] == marms.KNOB_ARMS and data["modules"] == {}
    runs = case["runs"]
    assert sorted(x["label"] for x in runs) == ["knob-off", "knob-on"]
    for x in runs:
        assert x["samples"] > 0 and x["grouped_share"] == 0, x
