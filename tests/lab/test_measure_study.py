"""numaforge.measure.study: a probe study kept block by block in one file, so the protocol's 20 blocks (about
4 VM-hours on TCG) can run in chunks: the schedule does not depend on where the study is cut, a resumed study
refuses other settings, and the file is written whole or not at all."""

import json

import pytest

from numaforge.kernel import labkernel
from numaforge.measure import scenario, study

ARMS = ["off", "winner", "alt-closer-or-gain", "alt-root-cause", "null"]
SETTINGS = {"arms": ARMS, "seed": 13, "params": {"seconds": 60, "mb": 64}, "kernel": "5.10.262"}


def blocks(n: int, case: str = "source spare") -> dict[str, list[list[scenario.ProbeMetrics]]]:
    out = []
    for b in range(1, n + 1):
        out.append([scenario.ProbeMetrics(a, b, not_closer=i, move_path=[[2, 3]]) for i, a in enumerate(ARMS)])
    return {case: out}


def test_block_order_is_a_seeded_permutation_of_its_own_block():
    orders = [study.block_order(ARMS, 13, "source spare", b) for b in range(1, 21)]
    assert all(sorted(o) == sorted(ARMS) for o in orders)
    assert orders[4] == study.block_order(ARMS, 13, "source spare", 5)  # same block, same order, any chunking
    assert len({tuple(o) for o in orders}) > 5  # it does vary from block to block
    assert study.block_order(ARMS, 13, "source busy (control)", 1) != study.block_order(
        ARMS, 13, "source spare", 1
    ) or study.block_order(ARMS, 13, "source busy (control)", 2) != study.block_order(ARMS, 13, "source spare", 2)
    assert (
        study.block_order(ARMS, 14, "source spare", 1) != orders[0]
        or study.block_order(ARMS, 14, "source spare", 2) != orders[1]
    )


def test_a_saved_study_loads_back_with_its_blocks_and_chunks(tmp_path):
    path = tmp_path / "s.json"
    assert study.load(path, SETTINGS) == {}  # a new study
    study.save(path, SETTINGS, blocks(3), [{"from_block": 1, "to_block": 3}])
    back = study.load(path, SETTINGS)
    assert len(back["source spare"]) == 3
    assert back["source spare"][2][1] == scenario.ProbeMetrics("winner", 3, not_closer=1, move_path=[[2, 3]])
    assert study.chunks_of(path) == [{"from_block": 1, "to_block": 3}]
    assert not list(tmp_path.glob(".s.json.*"))  # no temporary file left beside it


def test_other_settings_are_refused_with_what_differs(tmp_path):
    path = tmp_path / "s.json"
    study.save(path, SETTINGS, blocks(2), [])
    with pytest.raises(scenario.ScenarioError) as e:
        study.load(path, {**SETTINGS, "params": {"seconds": 25, "mb": 64}})
    assert "params: study {'seconds': 60, 'mb': 64}, now {'seconds': 25, 'mb': 64}" in e.value.what
    assert e.value.where == str(path) and "another --study path" in e.value.fix


@pytest.mark.parametrize(
    "text, said",
    [
        ("{not json", "not JSON"),
        (json.dumps({"cases": {}}), "not a probe study file"),
        (
            json.dumps({"format": study.FORMAT, "settings": SETTINGS, "blocks": {"x": [[{"label": "off"}]]}}),
            "not a probe run record",
        ),
        (
            json.dumps(
                {
                    "format": study.FORMAT,
                    "settings": SETTINGS,
                    "blocks": {"x": [[{"label": "off", "round": 1, "pwn": 1}]]},
                }
            ),
            "not a probe run record",
        ),
    ],
)
def test_a_file_that_is_not_a_study_is_a_clear_error(tmp_path, text, said):
    path = tmp_path / "s.json"
    path.write_text(text)
    with pytest.raises(scenario.ScenarioError) as e:
        study.load(path, SETTINGS)
    assert said in e.value.what and e.value.fix


def test_cases_with_different_block_counts_are_refused(tmp_path):
    path = tmp_path / "s.json"
    study.save(path, SETTINGS, {**blocks(2), **blocks(1, "source busy (control)")}, [])
    with pytest.raises(scenario.ScenarioError, match="different numbers of blocks"):
        study.load(path, SETTINGS)


# the lab kernel's recipes and the content keys of two builds of each (what labkernel.lab_key gives)
RECIPES = {name: {"config": name, "key": f"{i:x}" * 20} for i, name in enumerate(labkernel.LAB_CONFIGS, 10)}


def test_a_new_study_pins_the_lab_kernel_it_boots_on_its_first_block(tmp_path):
    path = tmp_path / "s.json"
    for lab in RECIPES.values():
        pinned = study.pin_lab_kernel(SETTINGS, None, lab, str(path))
        assert pinned == {**SETTINGS, study.LAB_KERNEL: lab}
        study.save(path, pinned, blocks(1), [])  # the first block's save writes it
        settings, _chunks, _blocks = study.read(path)
        assert settings[study.LAB_KERNEL] == lab
        assert study.pin_lab_kernel(SETTINGS, settings, lab, str(path)) == pinned  # the same kernel goes on


@pytest.mark.parametrize("was", list(RECIPES))
@pytest.mark.parametrize("now", list(RECIPES))
def test_a_study_on_another_lab_kernel_is_refused_naming_both_and_the_variable(tmp_path, was, now):
    """Every pair of recipes, and the same recipe whose inputs changed (another content key)."""
    path = str(tmp_path / "s.json")
    old = {**SETTINGS, study.LAB_KERNEL: RECIPES[was]}
    booting = RECIPES[now] if was != now else {**RECIPES[now], "key": "0" * 20}
    with pytest.raises(study.LabKernelMismatch) as e:
        study.pin_lab_kernel(SETTINGS, old, booting, path)
    err = e.value
    assert err.exit_code == 2 and err.where == path
    for pin in (RECIPES[was], booting):
        assert f"{pin['config']!r} (content key {pin['key']})" in err.what
    assert f"{labkernel.LAB_CONFIG_ENV}={was}" in err.fix and "another --study path" in err.fix


def test_a_pinned_study_is_refused_on_a_kernel_that_is_not_the_lab_kernel(tmp_path):
    old = {**SETTINGS, study.LAB_KERNEL: RECIPES["defconfig"]}
    with pytest.raises(study.LabKernelMismatch) as e:
        study.pin_lab_kernel(SETTINGS, old, None, "s.json")
    assert "not the lab kernel" in e.value.what and "--kernel lab" in e.value.fix


def test_a_study_from_before_the_pin_goes_on_unpinned(tmp_path):
    """Its settings stay those it was started with (study.load compares them whole), so it can be finished."""
    assert study.pin_lab_kernel(SETTINGS, SETTINGS, RECIPES["defconfig"], "s.json") == SETTINGS
    assert study.pin_lab_kernel(SETTINGS, None, None, "s.json") == SETTINGS  # --kernel debian: nothing to pin
