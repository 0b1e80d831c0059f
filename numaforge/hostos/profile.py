"""Host OS profiles: Jinja2 YAML rendered in the sandbox over inventory facts, with ``extends`` (pure core).

A profile is ``hostos/profiles/<name>.yaml.j2``; docs/HOSTOS.md is the full reference::

    description: free text
    extends: epyc-host-baseline        # optional; the parent renders over the same facts, the child wins per key
    sysctl:                            # /proc/sys keys; null removes a key a parent set
      vm.zone_reclaim_mode: 0
    thp: {enabled: madvise, defrag: defer+madvise}
    cpufreq_governor: performance      # null: leave the governor alone
    irq:
      devices: {{ (gpus + nics) | tojson }}   # PCI addresses whose IRQs get pinned
      cpus: local                      # local (the device's local_cpulist) | node:N | a cpulist "0-7"
      irqbalance: ban                  # ban: irqbalance leaves the pinned IRQs alone (--banirq); none
    checks:
      device_numa: true                # each device's numa_node against the NUMA layout the BIOS NPS gives
      nodes: 8                         # optional: the node count to expect (default: sockets x the BIOS NPS)
      expect_node: {"0000:41:00.0": 1} # optional: the node a device must report

Templates render in jinja2's ImmutableSandboxedEnvironment with StrictUndefined: inventory text is data, and a
misspelled fact is an error naming file:line.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from .. import paths, templating
from ..errors import ProfileError

__all__ = ["HostProfile", "render_profile", "find_profile", "default_profiles_dir", "profile_facts", "ProfileError"]

PCI_ADDR = r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$"
SYSCTL_KEY = r"^[a-z][a-z0-9_]*(\.[A-Za-z0-9_-]+)+$"
THP_ENABLED = ["always", "madvise", "never"]
THP_DEFRAG = ["always", "defer", "defer+madvise", "madvise", "never"]

PROFILE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "description": {"type": "string"},
        "extends": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"},
        "sysctl": {
            "type": ["object", "null"],
            "propertyNames": {"pattern": SYSCTL_KEY},
            "additionalProperties": {
                "anyOf": [{"type": "integer"}, {"type": "null"}, {"type": "string", "pattern": r"^[^\n\r]*$"}]
            },
        },
        "thp": {
            "type": ["object", "null"],
            "additionalProperties": False,
            "properties": {"enabled": {"enum": THP_ENABLED + [None]}, "defrag": {"enum": THP_DEFRAG + [None]}},
        },
        "cpufreq_governor": {"type": ["string", "null"], "pattern": r"^[a-z][a-z0-9_]*$"},
        "irq": {
            "type": ["object", "null"],
            "additionalProperties": False,
            "properties": {
                "devices": {"type": "array", "items": {"type": "string", "pattern": PCI_ADDR}},
                "cpus": {"type": "string", "pattern": r"^(local|node:[0-9]+|[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)$"},
                "irqbalance": {"enum": ["ban", "none"]},
            },
        },
        "checks": {
            "type": ["object", "null"],
            "additionalProperties": False,
            "properties": {
                "device_numa": {"type": "boolean"},
                "nodes": {"type": ["integer", "null"], "minimum": 1},
                "expect_node": {
                    "type": ["object", "null"],
                    "propertyNames": {"pattern": PCI_ADDR},
                    "additionalProperties": {"type": "integer", "minimum": 0},
                },
            },
        },
    },
}


def default_profiles_dir() -> Path:
    """The project's hostos/profiles, else the built-in one (numaforge.paths)."""
    return paths.data_dir("hostos", "profiles")


@dataclass
class HostProfile:
    name: str
    sysctl: dict[str, str] = field(default_factory=dict)  # key -> value as the kernel prints it
    thp: dict[str, str] = field(default_factory=dict)  # enabled/defrag -> value
    governor: str | None = None
    irq_devices: list[str] = field(default_factory=list)
    irq_cpus: str = "local"
    irqbalance: str = "ban"
    device_numa: bool = True
    nodes: int | None = None
    expect_node: dict[str, int] = field(default_factory=dict)
    chain: list[str] = field(default_factory=list)
    description: str = ""

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "sysctl": self.sysctl,
            "thp": self.thp,
            "cpufreq_governor": self.governor,
            "irq": {"devices": self.irq_devices, "cpus": self.irq_cpus, "irqbalance": self.irqbalance},
            "checks": {"device_numa": self.device_numa, "nodes": self.nodes, "expect_node": self.expect_node},
            "chain": self.chain,
        }


def profile_facts(host) -> dict[str, Any]:
    """The facts a host profile renders over: the same as the BIOS profiles' (numaforge.templating.host_facts)."""
    return templating.host_facts(host)


def find_profile(name: str, profiles_dir: Path | None = None) -> Path:
    if profiles_dir is None:  # the project's profile overrides the built-in one of the same name
        found = paths.find_data("hostos", "profiles", f"{name}.yaml.j2")
        if found is not None and found.is_file():
            return found
    return templating.find_template(name, [profiles_dir or default_profiles_dir()], "host profile")


def _render(path: Path, facts: dict[str, Any]) -> str:
    return templating.render_file(path, facts, kind="host profile")


def _parse(text: str, path: Path) -> dict:
    doc = templating.parse_rendered_yaml(text, path, kind="host profile")
    doc = {} if doc is None else doc
    if not isinstance(doc, dict):
        raise ProfileError("a host profile must render to a mapping", str(path), "start it with `sysctl:`")
    lines = templating.key_lines(doc)
    errors = sorted(
        jsonschema.Draft202012Validator(PROFILE_SCHEMA).iter_errors(doc),
        key=lambda e: [str(p) for p in e.absolute_path],
    )
    if errors:
        err = errors[0]
        keypath = tuple(str(p) for p in err.absolute_path)
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            known = list((err.schema.get("properties") or {}).keys())
            extra = [k for k in err.instance if k not in known]
            if extra:
                keypath += (str(extra[0]),)
                close = difflib.get_close_matches(str(extra[0]), known, n=1)
                line = lines.get(keypath)
                raise ProfileError(
                    f"unknown key '{'.'.join(keypath)}'",
                    f"{path}:{line}" if line else str(path),
                    (f"did you mean '{close[0]}'? " if close else "") + f"allowed here: {', '.join(known)}",
                )
        if err.validator == "propertyNames" or (
            err.validator == "pattern" and keypath and keypath[0] == "sysctl" and len(keypath) == 1
        ):
            bad = err.instance
            keypath += (str(bad),)
        line = lines.get(keypath) or lines.get(keypath[:-1])
        allowed = ""
        if "enum" in err.schema:
            allowed = "allowed values: " + ", ".join(repr(v) for v in err.schema["enum"] if v is not None)
        elif "pattern" in err.schema:
            allowed = f"must match {err.schema['pattern']}"
        raise ProfileError(
            f"'{'.'.join(keypath) or '<top>'}': {err.message}",
            f"{path} (rendered line {line})" if line else str(path),
            allowed or "see docs/HOSTOS.md for the profile format",
        )
    return doc


def _value(v) -> str:
    return str(v).strip()


def render_profile(name: str, facts: dict[str, Any], profiles_dir: Path | None = None) -> HostProfile:
    """Render a host profile and its ``extends`` chain over ``facts``; the child wins per key."""
    chain: list[tuple[Path, dict]] = []
    seen: list[str] = []
    current: str | None = name
    while current is not None:
        try:
            path = find_profile(current, profiles_dir)
        except ProfileError as exc:
            if not chain:
                raise
            raise templating.extends_error(exc, current, chain[-1][0], chain[-1][1], "host profile") from None
        key = str(path.resolve())
        if key in seen:
            raise ProfileError(
                "host profiles extend each other in a cycle: " + " -> ".join(Path(s).name for s in seen + [key]),
                str(path),
                "remove one of the `extends:` lines",
            )
        seen.append(key)
        doc = _parse(_render(path, facts), path)
        chain.append((path, doc))
        current = doc.get("extends")
        profiles_dir = path.parent
    merged: dict[str, Any] = {"sysctl": {}, "thp": {}, "irq": {}, "checks": {}}
    governor = None
    for _path, doc in reversed(chain):
        for section in ("sysctl", "thp", "irq", "checks"):
            merged[section].update(doc.get(section) or {})
        if "cpufreq_governor" in doc:
            governor = doc["cpufreq_governor"]
    irq, checks = merged["irq"], merged["checks"]
    head = chain[0][0]
    return HostProfile(
        name=re.sub(r"\.ya?ml(\.j2)?$", "", head.name),
        sysctl={k: _value(v) for k, v in merged["sysctl"].items() if v is not None},
        thp={k: v for k, v in merged["thp"].items() if v is not None},
        governor=governor,
        irq_devices=list(dict.fromkeys(irq.get("devices") or [])),
        irq_cpus=irq.get("cpus", "local"),
        irqbalance=irq.get("irqbalance", "ban"),
        device_numa=checks.get("device_numa", True),
        nodes=checks.get("nodes"),
        expect_node=dict(checks.get("expect_node") or {}),
        chain=[str(p) for p, _ in chain],
        description=str(chain[0][1].get("description", "")),
    )
