"""BIOS profiles: Jinja2 templates over inventory facts that render to abstract settings (pure core).

A profile is ``bios/profiles/<name>.yaml.j2``. It renders (with StrictUndefined, so a misspelled fact is an
error) to YAML of this shape -- docs/bios-profiles.md is the full reference::

    description: free text
    extends: epyc-baseline          # optional; the parent renders over the same facts, the child wins
    settings:                       # abstract settings, validated by SETTINGS_SCHEMA
      numa_nodes_per_socket: 4
      pcie_aspm: [l0s, disabled]    # a preference list: the first value the platform offers wins
      pcie_acs: {value: false, optional: true}   # skipped (and shown so) where the platform lacks it
    raw:                            # escape hatch: vendor AttributeName -> value, per vendor flavour;
      dell: {ProcCStates: Disabled} # supersedes any setting mapped to the same attribute, even a failing one

``render_profile(name, facts)`` returns a ``Profile`` with the merged settings, merged raw attributes and the
chain of files it came from. Every error names the file (and line) and how to fix it.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from .. import paths, templating
from ..errors import ProfileError
from ..templating import host_facts as host_facts  # re-exported: bios callers take facts from here
from .presets import UNVERIFIED_POLICIES

VENDORS = ("dell", "hpe", "supermicro", "lenovo", "generic")

# The abstract settings a profile may set. Values are the profile author's vocabulary; vendors.py maps them.
SETTINGS_SCHEMA: dict[str, dict] = {
    "numa_nodes_per_socket": {
        "enum": [0, 1, 2, 4],
        "description": "NPS: NUMA nodes per socket (0 = one node for the whole machine)",
    },
    "llc_as_numa": {"type": "boolean", "description": "report each L3 cache (CCX/CCD) as its own NUMA domain"},
    "memory_interleaving": {"type": "boolean", "description": "interleave memory across channels/dies"},
    "pcie_acs": {"type": "boolean", "description": "PCIe Access Control Services (off lets P2P DMA go direct)"},
    "pcie_aspm": {"enum": ["disabled", "l0s", "l1", "l0s_l1"], "description": "PCIe link power states allowed"},
    "iommu": {"type": "boolean", "description": "AMD IOMMU (AMD-Vi)"},
    "sriov": {"type": "boolean", "description": "SR-IOV support"},
    "determinism": {"enum": ["performance", "power"], "description": "AMD determinism slider"},
}


def _setting_forms(one: dict) -> dict:
    """A setting is a value, a preference list of values, or {value: <value or list>, optional: bool}."""
    value = {k: v for k, v in one.items() if k != "description"}
    prefs = {"type": "array", "items": value, "minItems": 1, "uniqueItems": True}
    return {
        "description": one.get("description", ""),
        "anyOf": [
            value,
            prefs,
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["value"],
                "properties": {"value": {"anyOf": [value, prefs]}, "optional": {"type": "boolean"}},
            },
        ],
    }


PROFILE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "extends": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"},
        # bios-apply's policy for values no public source shows (numaforge.bios.plan.unverified_policy)
        "unverified": {"enum": list(UNVERIFIED_POLICIES)},
        "settings": {
            "type": ["object", "null"],
            "additionalProperties": False,
            "properties": {k: _setting_forms(v) for k, v in SETTINGS_SCHEMA.items()},
        },
        "raw": {
            "type": ["object", "null"],
            "additionalProperties": False,
            "properties": {
                v: {
                    "type": ["object", "null"],
                    "propertyNames": {"pattern": r"^[A-Za-z0-9_.:\[\]-]+$"},
                    "additionalProperties": {"type": ["string", "integer", "boolean"]},
                }
                for v in VENDORS
            },
        },
    },
}


def default_profiles_dir() -> Path:
    """The project's bios/profiles, else the built-in one (numaforge.paths)."""
    return paths.data_dir("bios", "profiles")


@dataclass
class Profile:
    name: str
    settings: dict[str, Any]  # abstract setting -> value (merged over the extends chain)
    raw: dict[str, dict[str, Any]]  # vendor -> AttributeName -> value
    chain: list[str] = field(default_factory=list)  # files, child first
    description: str = ""
    origin: dict[str, str] = field(default_factory=dict)  # setting -> profile name that set it
    optional: set[str] = field(default_factory=set)  # settings skipped where the platform lacks them
    unverified: str | None = None  # the `unverified:` policy key (the child's, else its parent's), None unset

    def raw_for(self, vendor: str) -> dict[str, Any]:
        return dict(self.raw.get(vendor) or {})


def find_profile(name: str, profiles_dir: Path | None = None, kind: str = "BIOS profile") -> Path:
    """A profile name (``epyc-gpudirect``) or a path to a ``.yaml.j2`` file. Without profiles_dir: the project's
    bios/profiles first, then the built-in ones (numaforge.paths)."""
    dirs = [Path(profiles_dir)] if profiles_dir else (paths.data_dirs("bios", "profiles") or [default_profiles_dir()])
    return templating.find_template(name, dirs, kind)


def render_text(path: Path, facts: dict[str, Any]) -> str:
    """Render one template file in the profiles' sandbox (numaforge.templating); errors carry file:line."""
    return templating.render_file(path, facts)


def parse_rendered(text: str, path: Path) -> dict:
    """Parse and schema-check one rendered profile document (once per distinct text and path in a process:
    alike hosts render the same text; the document returned is shared and must not be changed)."""
    return _parse_rendered(text, str(path))


@functools.cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(PROFILE_SCHEMA)


@functools.lru_cache(maxsize=256)
def _parse_rendered(text: str, where: str) -> dict:
    path = Path(where)
    doc = templating.parse_rendered_yaml(text, path)
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ProfileError(
            "a profile must render to a mapping (description/extends/settings/raw)",
            str(path),
            "start the profile with `settings:`",
        )
    lines = templating.key_lines(doc)
    validator = _validator()
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        if err.validator == "anyOf" and err.context:  # a setting's forms: report the plain-value form's error
            err = min(err.context, key=lambda e: (len(e.relative_schema_path) > 2, e.relative_schema_path[0]))
        keypath = tuple(str(p) for p in err.absolute_path)
        where_line = None
        if err.validator == "additionalProperties":
            extra = [k for k in (err.instance or {}) if k not in (err.schema.get("properties") or {})]
            if extra:
                keypath = keypath + (extra[0],)
                known = list((err.schema.get("properties") or {}).keys())
                close = difflib.get_close_matches(extra[0], known, n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                where_line = lines.get(keypath)
                where = f"{path}:{where_line}" if where_line else str(path)
                raise ProfileError(
                    f"unknown key '{'.'.join(keypath)}'", where, f"{hint}allowed here: {', '.join(known)}"
                ) from None
        where_line = lines.get(keypath) or lines.get(keypath[:-1])
        where = f"{path} (rendered line {where_line})" if where_line else str(path)
        allowed = ""
        if "enum" in err.schema:
            allowed = "allowed values: " + ", ".join(repr(v) for v in err.schema["enum"])
        elif "type" in err.schema:
            allowed = f"expected {err.schema['type']}"
        raise ProfileError(
            f"'{'.'.join(keypath) or '<top>'}': {err.message}", where, allowed or "see docs/bios-profiles.md"
        ) from None
    return doc


def render_profile(name: str, facts: dict[str, Any], profiles_dir: Path | None = None) -> Profile:
    """Render a profile and its ``extends`` chain over ``facts``; the child overrides the parent."""
    chain: list[tuple[str, Path, dict]] = []
    seen: list[str] = []
    current: str | None = name
    path = find_profile(name, profiles_dir)
    while True:
        key = str(path.resolve())
        if key in seen:
            names = " -> ".join(Path(s).name for s in seen + [key])
            raise ProfileError(
                f"profiles extend each other in a cycle: {names}", str(path), "remove one of the `extends:` lines"
            )
        seen.append(key)
        doc = parse_rendered(render_text(path, facts), path)
        chain.append((_profile_name(path), path, doc))
        current = doc.get("extends")
        if current is None:
            break
        try:
            path = _find_parent(current, path, seen)
        except ProfileError as exc:
            raise templating.extends_error(exc, current, path, doc, "BIOS profile") from None
    settings: dict[str, Any] = {}
    origin: dict[str, str] = {}
    optional: set[str] = set()
    raw: dict[str, dict[str, Any]] = {}
    unverified: str | None = None
    for pname, _path, doc in reversed(chain):  # parent first, child last wins
        unverified = doc.get("unverified", unverified)
        for k, v in (doc.get("settings") or {}).items():
            if isinstance(v, dict):  # {value: ..., optional: true}
                (optional.add if v.get("optional") else optional.discard)(k)
                v = v["value"]
            else:
                optional.discard(k)
            settings[k] = v
            origin[k] = pname
        for vendor, attrs in (doc.get("raw") or {}).items():
            raw.setdefault(vendor, {}).update(attrs or {})
    head = chain[0][2]
    return Profile(
        name=chain[0][0],
        settings=settings,
        raw=raw,
        chain=[str(p) for _, p, _ in chain],
        description=str(head.get("description", "")),
        origin=origin,
        optional=optional,
        unverified=unverified,
    )


def _find_parent(name: str, child: Path, seen: list[str]) -> Path:
    """The profile a child's ``extends: name`` means: next to the child first, then the project's and the built-in
    profiles (numaforge.paths), skipping files already in the chain -- so a project profile extends a built-in one,
    also one of its own name (``epyc-gpudirect`` in the project extending the built-in ``epyc-gpudirect``)."""
    dirs = [child.parent] + [d for d in paths.data_dirs("bios", "profiles") if d != child.parent]
    for d in dirs:
        p = d / f"{name}{templating.SUFFIX}"
        if p.is_file() and str(p.resolve()) not in seen:
            return p
    return templating.find_template(name, dirs, "BIOS profile")  # a cycle (found, seen) or an unknown name


def _profile_name(path: Path) -> str:
    return re.sub(r"\.ya?ml(\.j2)?$", "", path.name)
