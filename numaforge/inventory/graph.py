"""Group nesting, computed without recursion: depths, cycles and a bound on how deep groups may nest.

Both inventory formats nest groups through `children`. A group's depth is the length of the longest chain of
parents above it (top-level groups have depth 1 below an implicit root, as Ansible counts them); variables of
shallower groups are applied first. Thousands of nested groups must give a clear error, not RecursionError.
"""

from __future__ import annotations

from ..errors import InventoryError

MAX_GROUP_DEPTH = 100


def nesting_depths(children: dict[str, list[str]], where: dict[str, str], root: str | None = None) -> dict[str, int]:
    """Depth of every group; InventoryError for a cycle or nesting deeper than MAX_GROUP_DEPTH.

    `children` maps every group to its child groups (all must be keys); `where` gives each group's location
    for messages. With `root`, that group has depth 0 and everything else is measured below it.
    """
    indegree = {g: 0 for g in children}
    for kids in children.values():
        for c in kids:
            indegree[c] += 1
    depth = {g: (0 if g == root else 1) for g in children}
    ready = [g for g, n in indegree.items() if n == 0]
    order: list[str] = []
    while ready:
        g = ready.pop()
        order.append(g)
        for c in children[g]:
            depth[c] = max(depth[c], depth[g] + 1)
            indegree[c] -= 1
            if indegree[c] == 0:
                ready.append(c)
    if len(order) < len(children):
        cycle = _find_cycle(children, {g for g in children if indegree[g] > 0})
        raise InventoryError(
            f"groups form a cycle: {' -> '.join(cycle)}",
            where.get(cycle[0]),
            "remove one of the `children:` links so that groups nest as a tree",
        )
    limit = MAX_GROUP_DEPTH + (1 if root is not None else 0)
    deepest = max(depth, key=lambda g: depth[g], default=None)
    if deepest is not None and depth[deepest] > limit:
        raise InventoryError(
            f"groups nest {depth[deepest] - (1 if root is not None else 0)} levels deep (group "
            f"'{deepest}'); at most {MAX_GROUP_DEPTH} levels are allowed",
            where.get(deepest),
            "flatten the group tree: a host may be a direct member of several groups",
        )
    return depth


def _find_cycle(children: dict[str, list[str]], stuck: set[str]) -> list[str]:
    """A cycle among the groups Kahn's algorithm could not order (each of them has a parent in `stuck`)."""
    parents: dict[str, str] = {}
    for g in stuck:
        for c in children[g]:
            if c in stuck:
                parents.setdefault(c, g)
    start = min(stuck)
    path = [start]
    seen = {start: 0}
    node = start
    while True:
        node = parents[node]
        if node in seen:
            loop = path[seen[node] :] + [node]
            return list(reversed(loop))
        seen[node] = len(path)
        path.append(node)


def members(children: dict[str, list[str]], hosts: dict[str, list[str]], name: str) -> list[str]:
    """Hosts of a group and of every group below it, own hosts first, without duplicates (breadth first)."""
    out: dict[str, None] = {}
    seen: set[str] = set()
    level = [name]
    while level:
        nxt: list[str] = []
        for g in level:
            if g in seen:
                continue
            seen.add(g)
            out.update(dict.fromkeys(hosts.get(g, [])))
            nxt.extend(children.get(g, []))
        level = nxt
    return list(out)
