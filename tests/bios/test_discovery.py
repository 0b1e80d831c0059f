"""numaforge.bios.discovery: registries are reused only when they cover the host's Bios attributes, and both
registries and per-model shapes survive the run on disk. Pure (files only); the BMC side is in
tests/bench/test_compliant_fleet.py."""

import json

from numaforge.bios.discovery import RegistryCache, Shape
from numaforge.bios.registry import Registry


def registry(rid, *names):
    return Registry.from_json(
        {
            "Id": rid,
            "RegistryEntries": {
                "Attributes": [
                    {"AttributeName": n, "Type": "Enumeration", "Value": [{"ValueName": "On"}, {"ValueName": "Off"}]}
                    for n in names
                ]
            },
        }
    )


class Fetcher:
    def __init__(self, reg):
        self.reg, self.calls = reg, 0

    def __call__(self):
        self.calls += 1
        return self.reg


def test_one_registry_id_with_two_attribute_sets_is_two_registries(tmp_path):
    """Like one vendor registry id on two platforms: the R740-like registry does not serve an R750-like Bios."""
    cache = RegistryCache(persist=tmp_path)
    small, big = (
        Fetcher(registry("BiosAttributeRegistry.v1_0_0", "A", "B")),
        Fetcher(registry("BiosAttributeRegistry.v1_0_0", "A", "B", "C")),
    )
    assert cache.get("BiosAttributeRegistry.v1_0_0", small, attributes=["A", "B"]) is small.reg
    assert cache.get("BiosAttributeRegistry.v1_0_0", big, attributes=["A", "C"]) is big.reg
    assert cache.get("BiosAttributeRegistry.v1_0_0", big, attributes=["B"]) is small.reg  # first that covers
    assert (small.calls, big.calls, cache.fetches) == (1, 1, 2)
    assert len(list((tmp_path / "registries" / "BiosAttributeRegistry.v1_0_0").glob("*.json"))) == 2


def test_a_later_run_reads_registries_and_shapes_from_disk(tmp_path):
    first = RegistryCache(persist=tmp_path)
    fetch = Fetcher(registry("Reg.v1", "NumaNodesPerSocket", "PcieAcs"))
    first.get("Reg.v1", fetch, attributes=["NumaNodesPerSocket"])
    key = ("dell", "R7525", "")
    assert first.claim(key, wait=0) is None  # first host of the model discovers...
    shape = Shape(
        "/redfish/v1/SessionService/Sessions", "/redfish/v1/Systems/1", "/redfish/v1/Systems/1/Bios", "Reg.v1"
    )
    first.learn(key, shape)  # ...and teaches the others

    later = RegistryCache(persist=tmp_path)
    reg = later.get("Reg.v1", Fetcher(None), attributes=["NumaNodesPerSocket", "PcieAcs"])
    assert set(reg.attributes) == {"NumaNodesPerSocket", "PcieAcs"} and reg.attributes["PcieAcs"].values == [
        "On",
        "Off",
    ]
    assert (later.fetches, later.loaded) == (0, 1)
    assert later.claim(key, wait=0) == shape
    assert later.claim(("hpe", "DL385", ""), wait=0) is None


def test_a_stale_shape_is_replaced_and_a_corrupt_file_is_ignored(tmp_path):
    key = ("generic", "test", "")
    old = Shape("/s", "/redfish/v1/Systems/Gone", "/redfish/v1/Systems/Gone/Bios", "Reg.v1")
    new = Shape("/s", "/redfish/v1/Systems/1", "/redfish/v1/Systems/1/Bios", "Reg.v1")
    c = RegistryCache(persist=tmp_path)
    c.learn(key, old)
    c.learn(key, new)  # a second learner does not overwrite...
    assert RegistryCache(persist=tmp_path).claim(key, wait=0) == old
    c.learn(key, new, replace=True)  # ...unless the known shape proved stale
    assert RegistryCache(persist=tmp_path).claim(key, wait=0) == new
    (tmp_path / "shapes.json").write_text("{not json")
    broken = RegistryCache(persist=tmp_path)
    assert broken.claim(key, wait=0) is None  # unreadable: discover, as with no file
    broken.learn(key, new)
    assert (
        json.loads((tmp_path / "shapes.json").read_text())["shapes"][0]["shape"]["system_path"]
        == "/redfish/v1/Systems/1"
    )


def test_without_persist_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    c = RegistryCache()
    c.get("Reg.v1", Fetcher(registry("Reg.v1", "A")), attributes=["A"])
    c.learn(("x", "", ""), Shape("/s", "/sys", "/bios", "Reg.v1"))
    assert list(tmp_path.iterdir()) == []
