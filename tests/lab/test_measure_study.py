"""numaforge.measure.study: a probe study kept block by block in one file, so the protocol's 20 blocks (about
4 VM-hours on TCG) can run in chunks: the schedule does not depend on where the study is cut, a resumed study
refuses other settings, and the file is written whole or not at all."""

import json

import pytest

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
