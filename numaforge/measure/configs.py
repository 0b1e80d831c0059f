"""The probe scenario's configuration space (issue 42 item 1): every (P, S) pair of a topology, and its classes.

A pair is P (the preferred node, holding the probe's memory, full) and S (the source node, where the probe starts)
among the nodes with CPUs (the scenario pins hogs on P's CPUs and starts the probe on S's). Two kinds of class:

- ``slit_classes``: the orbits of the pairs under the topology's symmetries, the permutations g of the nodes that
  keep the SLIT (dist[g(a)][g(b)] == dist[a][b] for every a, b) and each node's CPU count (a memory-only node is
  not interchangeable with one that has CPUs). Pairs in one orbit look the same to anything that reads only
  distances.
- ``scan_classes``: the same, but g must also keep the order in which 5.10's ``task_numa_migrate()`` visits the
  third nodes (``for_each_online_node``, ascending; S and P are skipped without touching the loop's state). The
  kernel is not blind to node numbers: the loop weighs each third node with the distance computed for the node
  scanned before it (``dist`` is taken before ``env.dst_nid = nid``), and the idle-node shortcut lets the last
  idle node scanned win. On backplane4 the SLIT puts (P, S) = (0, 2) and (3, 0) in one orbit, but in (0, 2) the
  node next to the memory is scanned first and in (3, 0) last, which is where issue 42 predicts they differ. So a
  test or study that runs one pair per class uses ``scan_classes``; ``slit_classes`` says which of those the
  distances alone would have merged.

Both are derived from the distance matrix, never listed by hand; each class is named by its smallest pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from typing import Sequence

from .metrics import Topo

Pair = tuple[int, int]
Matrix = Sequence[Sequence[int]]


@dataclass(frozen=True)
class PairClass:
    """One class of (P, S) pairs: ``rep`` (its smallest pair) and every member, sorted."""

    rep: Pair
    members: tuple[Pair, ...]


def cpu_nodes(cpus: Sequence[int]) -> list[int]:
    """The nodes with at least one CPU (cpus[i]: CPUs of node i)."""
    return [n for n, c in enumerate(cpus) if c > 0]


def pairs(cpus: Sequence[int]) -> list[Pair]:
    """Every (P, S) with P != S, both nodes with CPUs, sorted."""
    nodes = cpu_nodes(cpus)
    return [(p, s) for p in nodes for s in nodes if p != s]


def third_nodes(pair: Pair, n: int) -> list[int]:
    """The nodes 5.10's third-node loop evaluates for (P, S), in its scan order (every node but P and S)."""
    return [x for x in range(n) if x not in pair]


def symmetries(distances: Matrix, cpus: Sequence[int]) -> list[tuple[int, ...]]:
    """Every permutation g (g[a] is a's image) of the nodes that keeps the SLIT and the CPU count of each node;
    the identity first."""
    n = len(distances)
    if len(cpus) != n or any(len(row) != n for row in distances):
        raise ValueError(f"the SLIT must be {len(cpus)} x {len(cpus)} (one row and column per node)")
    return [
        g
        for g in permutations(range(n))
        if all(cpus[g[a]] == cpus[a] for a in range(n))
        and all(distances[g[a]][g[b]] == distances[a][b] for a in range(n) for b in range(n))
    ]


def keeps_scan_order(g: Sequence[int], pair: Pair, n: int) -> bool:
    """g maps (P, S)'s third nodes onto (g(P), g(S))'s in the same scan order (ascending to ascending)."""
    images = [g[x] for x in third_nodes(pair, n)]
    return images == sorted(images)


def slit_classes(distances: Matrix, cpus: Sequence[int]) -> list[PairClass]:
    """The orbits of ``pairs(cpus)`` under ``symmetries``."""
    return _classes(distances, cpus, scan=False)


def scan_classes(distances: Matrix, cpus: Sequence[int]) -> list[PairClass]:
    """The pairs equivalent under a symmetry that also keeps the third nodes' scan order (``keeps_scan_order``):
    a refinement of ``slit_classes``. The relation is an equivalence: the identity keeps the order, and inverses
    and compositions of order-keeping maps keep it."""
    return _classes(distances, cpus, scan=True)


def _classes(distances: Matrix, cpus: Sequence[int], scan: bool) -> list[PairClass]:
    n = len(distances)
    group = symmetries(distances, cpus)
    seen: set[Pair] = set()
    out = []
    for pair in pairs(cpus):
        if pair in seen:
            continue
        orbit = sorted({(g[pair[0]], g[pair[1]]) for g in group if not scan or keeps_scan_order(g, pair, n)})
        seen.update(orbit)
        out.append(PairClass(orbit[0], tuple(orbit)))
    return out


def equivalent(distances: Matrix, cpus: Sequence[int], a: Pair, b: Pair, scan: bool = False) -> bool:
    """Some symmetry maps pair a onto pair b (and, with ``scan``, keeps a's third nodes' scan order)."""
    n = len(distances)
    return any((g[a[0]], g[a[1]]) == b and (not scan or keeps_scan_order(g, a, n)) for g in symmetries(distances, cpus))


def from_topo(topo: Topo) -> tuple[list[list[int]], list[int]]:
    """(SLIT, CPUs per node) of a host as the run script reads it (numaforge.measure.metrics.parse_topo):
    nodes 0..n-1 from the distance rows; ValueError when the rows do not make an n x n matrix."""
    n = len(topo.distance)
    if sorted(topo.distance) != list(range(n)) or any(len(r) != n for r in topo.distance.values()):
        raise ValueError(f"the host's SLIT is not one row of {n} distances per node 0..{n - 1}")
    cpus = [0] * n
    for node in topo.cpu_node.values():
        if 0 <= node < n:
            cpus[node] += 1
    return [list(topo.distance[a]) for a in range(n)], cpus


def parse_pairs(text: str, distances: Matrix, cpus: Sequence[int], option: str = "--pairs") -> list[Pair]:
    """The pairs an option names: "all" (every pair), "classes" (one per scan class: its smallest pair) or
    "P:S,P:S,..."; ValueError with the option's name and what it takes otherwise."""
    if text == "all":
        return pairs(cpus)
    if text == "classes":
        return [c.rep for c in scan_classes(distances, cpus)]
    out = []
    valid = pairs(cpus)
    for part in text.split(","):
        p, _, s = part.strip().partition(":")
        pair = (int(p), int(s)) if p.isdigit() and s.isdigit() else None
        if pair not in valid:
            raise ValueError(
                f"bad {option} item {part.strip()[:40]!r}: give all, classes or P:S,... with P != S among the nodes "
                f"with CPUs {cpu_nodes(cpus)}"
            )
        out.append(pair)  # type: ignore[arg-type]
    return out
