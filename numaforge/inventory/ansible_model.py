"""The Ansible inventory as read (groups, hosts, their variables and where each was set) before numaforge turns
it into its own model; Ansible's variable precedence lives here (``AnsibleInventory.host_vars``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import InventoryError
from .graph import members, nesting_depths
from .yamlsrc import LMap

INTERNAL = ("all", "ungrouped")


@dataclass
class AGroup:
    name: str
    where: str
    vars: dict[str, Any] = field(default_factory=dict)
    var_where: dict[str, str] = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    priority: int = 1


@dataclass
class AHost:
    name: str
    where: str
    vars: dict[str, Any] = field(default_factory=dict)
    var_where: dict[str, str] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)  # direct groups, in the order the host was added


@dataclass
class AnsibleInventory:
    """The inventory as Ansible's inventory manager holds it, plus where every variable came from."""

    path: str
    groups: dict[str, AGroup] = field(default_factory=dict)
    hosts: dict[str, AHost] = field(default_factory=dict)
    depth: dict[str, int] = field(default_factory=dict)  # set by reconcile()
    parents: dict[str, list[str]] = field(default_factory=dict)  # set by reconcile()
    group_files: dict[str, list[tuple[LMap, str]]] = field(default_factory=dict)  # group_vars/ contents
    host_files: dict[str, list[tuple[LMap, str]]] = field(default_factory=dict)  # host_vars/ contents

    # ------------------------------------------------------------------------------------------ building
    def add_group(self, name: str, where: str) -> AGroup:
        if not isinstance(name, str) or not name:
            raise InventoryError(f"group name {name!r} is not valid", where, "use a non-empty string name")
        if name not in self.groups:
            self.groups[name] = AGroup(name, where)
        return self.groups[name]

    def add_host(self, name: str, group: str | None, where: str, port: int | None = None) -> AHost:
        if name not in self.hosts:
            self.hosts[name] = AHost(name, where)
            if port is not None:
                self.set_var(name, "ansible_port", port, where, host=True)
        h = self.hosts[name]
        if group and group not in h.groups:  # (a host's own group list is short; a group's may be 10^5)
            self.groups[group].hosts.append(name)
            h.groups.append(group)
        return h

    def set_var(self, entity: str, key, value, where: str, host: bool) -> None:
        if not isinstance(key, str):
            raise InventoryError(f"variable name {key!r} must be a string", where, "quote the name")
        obj: AHost | AGroup = self.hosts[entity] if host else self.groups[entity]
        if not host and key == "ansible_group_priority":
            try:
                obj.priority = int(value)  # type: ignore[union-attr]
            except (TypeError, ValueError):
                raise InventoryError(
                    f"ansible_group_priority {value!r} of group '{entity}' is not an integer",
                    where,
                    "write a whole number, e.g. ansible_group_priority: 10",
                ) from None
            return
        obj.vars[key] = value
        obj.var_where[key] = where

    def add_child(self, parent: str, child: str) -> None:
        if parent == child:
            raise InventoryError(
                f"group '{parent}' lists itself as a child",
                self.groups[parent].where,
                "remove the group from its own children",
            )
        if child not in self.groups[parent].children:
            self.groups[parent].children.append(child)

    def reconcile(self) -> None:
        """Ansible's rules after parsing: parentless groups under `all`, groupless hosts in `ungrouped`."""
        self.add_group("all", self.path)
        self.add_group("ungrouped", self.path)
        has_parent = {c for g in self.groups.values() for c in g.children}
        for name in list(self.groups):
            if name != "all" and name not in has_parent:
                self.add_child("all", name)
        ungrouped = self.groups["ungrouped"]
        for h in self.hosts.values():
            real = [g for g in h.groups if g not in INTERNAL]
            if real and "ungrouped" in h.groups:
                ungrouped.hosts.remove(h.name)
                h.groups.remove("ungrouped")
            elif not real and "ungrouped" not in h.groups:
                self.add_host(h.name, "ungrouped", h.where)
        self.parents = {}
        for g in self.groups.values():
            for c in g.children:
                self.parents.setdefault(c, []).append(g.name)
        self.depth = nesting_depths(
            {g.name: g.children for g in self.groups.values()},
            {g.name: g.where for g in self.groups.values()},
            root="all",
        )

    # ------------------------------------------------------------------------------------------ queries
    def host_groups(self, host: str) -> list[str]:
        """Every group the host is in (ancestors included, `all` included), in Ansible's var order."""
        parents = self.parents
        seen: set[str] = set()
        todo = list(self.hosts[host].groups)
        while todo:
            g = todo.pop()
            if g not in seen:
                seen.add(g)
                todo.extend(parents.get(g, []))
        return sorted(seen, key=lambda g: (self.depth[g], self.groups[g].priority, g))

    def group_hosts(self, name: str) -> list[str]:
        """Hosts of a group and of every group below it: the group's own first, then its children's."""
        return members(
            {g.name: g.children for g in self.groups.values()}, {g.name: g.hosts for g in self.groups.values()}, name
        )

    def resolve(self, host: str) -> tuple[dict[str, Any], dict[str, str]]:
        """The host's variables as Ansible resolves them, and where each value was set (file:line)."""
        values: dict[str, Any] = {}
        where: dict[str, str] = {}

        def layer(vs: dict, ws: dict | str) -> None:
            for k, v in vs.items():
                values[k] = v
                where[k] = ws if isinstance(ws, str) else ws.get(k, "")

        groups = self.host_groups(host)
        others = [g for g in groups if g != "all"]
        layer(self.groups["all"].vars, self.groups["all"].var_where)
        for g in others:
            layer(self.groups[g].vars, self.groups[g].var_where)
        for g in ["all"] + others:
            for data, fname in self.group_files.get(g, []):
                layer(data, {k: f"{fname}:{data.line_of(k)}" for k in data})
        h = self.hosts[host]
        layer(h.vars, h.var_where)
        for data, fname in self.host_files.get(host, []):
            layer(data, {k: f"{fname}:{data.line_of(k)}" for k in data})
        return values, where


# ---------------------------------------------------------------------------------------------- reading
