"""What Ansible itself makes of inventories: run as `python ansible_oracle.py CASES.json` with Ansible installed.

For each case {"path": inventory file, "limits": [patterns]} it prints, as JSON, what `ansible-inventory -i PATH
--list` computes (the same library calls that command makes: InventoryManager, VariableManager.get_vars with
stage "all", internal variables removed), every templated variable as Ansible's Templar renders it, and, for each limit, the hosts `--limit PATTERN` keeps. One process
for every case keeps the conformance test fast; test_oracle_matches_the_ansible_inventory_command checks that
this equals the real command's output. A case Ansible refuses is reported as {"error": message}.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def plain(value):
    """Ansible's tagged values (2.19 data tagging) as plain JSON types."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [plain(v) for v in value]
    return str(value)


def has_template(value) -> bool:
    if isinstance(value, dict):
        return any(has_template(v) for v in value.values())
    if isinstance(value, list):
        return any(has_template(v) for v in value)
    return isinstance(value, str) and any(m in value for m in ("{{", "{%", "{#"))


def render_templates(loader, hv: dict, shown: dict) -> dict:
    """Every variable whose value is a template, as Ansible's Templar renders it with the host's variables (the
    values a play would see); one that Ansible cannot render is {"error": message}."""
    from ansible.template import Templar

    templar = Templar(loader=loader, variables=hv)
    out = {}
    for name, value in shown.items():
        if has_template(value):
            try:
                out[name] = plain(templar.template(hv[name]))
            except Exception as exc:
                out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def main() -> None:
    from ansible import constants as C
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import init_plugin_loader
    from ansible.vars.manager import VariableManager

    init_plugin_loader([])
    cases = json.load(open(sys.argv[1]))
    out: dict[str, Any] = {}
    for case in cases:
        loader = DataLoader()
        try:
            inv = InventoryManager(loader=loader, sources=[case["path"]])
            if not inv.hosts and not [g for g in inv.groups if g not in ("all", "ungrouped")]:
                raise RuntimeError("Ansible parsed no inventory from this source")
            vm = VariableManager(loader=loader, inventory=inv)
            hostvars = {}
            rendered = {}
            for host in inv.get_hosts("all"):
                hv = vm.get_vars(host=host, include_hostvars=False, stage="all")
                hostvars[host.name] = plain({k: v for k, v in hv.items() if k not in C.INTERNAL_STATIC_VARS})
                rendered[host.name] = render_templates(loader, hv, hostvars[host.name])
            groups = {
                name: {"hosts": sorted(h.name for h in g.hosts), "children": sorted(c.name for c in g.child_groups)}
                for name, g in inv.groups.items()
            }
            limits = {}
            for pattern in case.get("limits", []):
                inv.subset(pattern)
                limits[pattern] = sorted(h.name for h in inv.get_hosts("all"))
                inv.subset(None)
            out[case["name"]] = {"hostvars": hostvars, "groups": groups, "limits": limits, "rendered": rendered}
        except Exception as exc:
            out[case["name"]] = {"error": f"{type(exc).__name__}: {exc}"}
    json.dump(out, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
