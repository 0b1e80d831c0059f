"""numaforge.measure.configs: the probe scenario's (P, S) pairs and their classes, for every topology the lab VM
defines (numaforge.lab.vm.TOPOLOGIES), each checked against invariants computed here from the SLIT directly, not
through the module's own permutation search."""

from collections import Counter

import pytest

from numaforge.lab import vm
from numaforge.measure import configs, metrics

TOPOS = list(vm.TOPOLOGIES.values())
IDS = [t.name for t in TOPOS]


def profile(t: vm.Topology, pair: tuple[int, int], ordered: bool) -> tuple:
    """What a distance-only view sees of a pair: d(P, S), the CPUs of P and S, and each third node's CPUs and
    distances to P and S (as a multiset, or in 5.10's scan order with the stale distance its loop weighs each
    third node with: the distance from S to the node scanned before it, P for the first)."""
    d, (p, s) = t.distances, pair
    third = configs.third_nodes(pair, t.nodes)
    rows = [(t.cpus[x], d[x][p], d[x][s]) for x in third]
    head = (d[p][s], d[s][p], t.cpus[p], t.cpus[s])
    if not ordered:
        return head, tuple(sorted(rows))
    stale = [d[s][prev] for prev in [p, *third[:-1]]]
    return head, tuple(rows), tuple(stale)


@pytest.mark.parametrize("t", TOPOS, ids=IDS)
def test_classes_partition_the_pairs_and_members_are_slit_equivalent(t):
    every = configs.pairs(t.cpus)
    assert len(every) == len(configs.cpu_nodes(t.cpus)) * (len(configs.cpu_nodes(t.cpus)) - 1)
    for scan, classes in (
        (False, configs.slit_classes(t.distances, t.cpus)),
        (True, configs.scan_classes(t.distances, t.cpus)),
    ):
        members = [m for c in classes for m in c.members]
        assert Counter(members) == Counter(every), f"{t.name}: classes do not partition the pairs"
        for c in classes:
            assert c.rep == min(c.members)
            for m in c.members:
                assert configs.equivalent(t.distances, t.cpus, c.rep, m, scan=scan)
                assert profile(t, m, ordered=False) == profile(t, c.rep, ordered=False), (t.name, c.rep, m)
                if scan:
                    assert profile(t, m, ordered=True) == profile(t, c.rep, ordered=True), (t.name, c.rep, m)
        # pairs of different classes are not equivalent (the classes are orbits, not arbitrary groupings)
        for i, a in enumerate(classes):
            for b in classes[i + 1 :]:
                assert not configs.equivalent(t.distances, t.cpus, a.rep, b.rep, scan=scan)


@pytest.mark.parametrize("t", TOPOS, ids=IDS)
def test_scan_classes_refine_the_slit_classes(t):
    slit = {m: c.rep for c in configs.slit_classes(t.distances, t.cpus) for m in c.members}
    for c in configs.scan_classes(t.distances, t.cpus):
        assert len({slit[m] for m in c.members}) == 1


@pytest.mark.parametrize("t", TOPOS, ids=IDS)
def test_symmetries_keep_the_slit_and_the_cpus(t):
    group = configs.symmetries(t.distances, t.cpus)
    assert group[0] == tuple(range(t.nodes))
    n = t.nodes
    for g in group:
        assert sorted(g) == list(range(n))
        assert all(t.distances[g[a]][g[b]] == t.distances[a][b] for a in range(n) for b in range(n))
        assert all(t.cpus[g[a]] == t.cpus[a] for a in range(n))


def test_the_studied_pair_and_the_predicted_one_share_a_slit_class_but_not_a_scan_class():
    """Issue 42: on backplane4 the study ran (P, S) = (0, 2); the stale distance of 5.10's loop is predicted to
    matter for P in {2, 3}, S in {0, 1} (4 of the 12 pairs). The SLIT alone cannot tell them apart."""
    t = vm.TOPOLOGIES["backplane4"]
    slit = configs.slit_classes(t.distances, t.cpus)
    scan = configs.scan_classes(t.distances, t.cpus)
    assert any({(0, 2), (3, 0)} <= set(c.members) for c in slit)
    predicted = {(p, s) for p in (2, 3) for s in (0, 1)}
    assert predicted in [set(c.members) for c in scan]
    assert len(configs.pairs(t.cpus)) == 12


def test_nps2_is_two_sockets_of_two_nodes():
    """The lab's nps2 topology is the NPS2 shape issue 42 asks for: every node has CPUs, two distinct off-node
    distances, and the nodes at the smaller one form two groups (sockets) of two."""
    t = vm.TOPOLOGIES["nps2"]
    d = t.distances
    off = sorted({d[a][b] for a in range(t.nodes) for b in range(t.nodes) if a != b})
    assert len(off) == 2 and all(c > 0 for c in t.cpus)
    near = {frozenset({a, *[b for b in range(t.nodes) if b != a and d[a][b] == off[0]]}) for a in range(t.nodes)}
    assert sorted(len(s) for s in near) == [2, 2] and frozenset().union(*near) == set(range(t.nodes))


@pytest.mark.parametrize("t", TOPOS, ids=IDS)
def test_parse_pairs(t):
    every = configs.pairs(t.cpus)
    assert configs.parse_pairs("all", t.distances, t.cpus) == every
    reps = configs.parse_pairs("classes", t.distances, t.cpus)
    assert reps == [c.rep for c in configs.scan_classes(t.distances, t.cpus)]
    assert configs.parse_pairs(",".join(f"{p}:{s}" for p, s in every), t.distances, t.cpus) == every
    no_cpu = [n for n in range(t.nodes) if n not in configs.cpu_nodes(t.cpus)]
    bad = ["1:1", "x:2", f"0:{t.nodes}", "0-1", *(f"{n}:0" for n in no_cpu)]
    for text in bad:
        with pytest.raises(ValueError, match="--pairs"):
            configs.parse_pairs(text, t.distances, t.cpus)


def test_a_slit_of_the_wrong_size_is_refused():
    with pytest.raises(ValueError, match="3 x 3"):
        configs.symmetries(((10, 20), (20, 10)), (1, 1, 1))


@pytest.mark.parametrize("t", TOPOS, ids=IDS)
def test_a_hosts_topology_gives_the_same_classes_as_the_lab_definition(t):
    """What the probe reads from a host (/sys/devices/system/node: cpulist and distance per node) gives the SLIT
    and CPU counts the lab VM was booted with, for every lab topology (2 CPUs per node, as the studies boot)."""
    tp = t.scaled(2)
    first = [sum(tp.cpus[:n]) for n in range(tp.nodes)]
    text = "\n".join(
        f"node {n} cpus {f'{first[n]}-{first[n] + c - 1}' if c else ''} dist {' '.join(map(str, tp.distances[n]))}"
        for n, c in enumerate(tp.cpus)
    )
    distances, cpus = configs.from_topo(metrics.parse_topo(text))
    assert distances == [list(r) for r in tp.distances] and cpus == list(tp.cpus)
    assert configs.scan_classes(distances, cpus) == configs.scan_classes(t.distances, t.cpus)


def test_a_host_slit_with_a_missing_row_is_refused():
    with pytest.raises(ValueError, match="not one row"):
        configs.from_topo(metrics.Topo({0: 0}, {0: [10, 20], 2: [20, 10]}))
