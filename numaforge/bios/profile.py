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
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import jsonschema
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from .. import paths, safeio, yamlsrc
from ..safeio import file_stamp
from . import budgeted
from .errors import ProfileError

MAX_PROFILE_BYTES = 1024 * 1024  # a profile template (safeio.check_input's cap)
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

    def raw_for(self, vendor: str) -> dict[str, Any]:
        return dict(self.raw.get(vendor) or {})


def host_facts(host) -> dict[str, Any]:
    """The facts a profile renders over, from an inventory Host (numaforge.inventory.model.Host)."""
    hw = host.hardware
    vendor = hw.vendor or (host.bmc.vendor if host.bmc and host.bmc.vendor != "auto" else None)
    return {
        "host": host.name,
        "vendor": vendor or "generic",
        "model": hw.platform or "",
        "sockets": hw.sockets or 1,
        "cpu_model": hw.cpu_model or "",
        "gpus": list(hw.gpus),
        "gpu_count": len(hw.gpus),
        "nics": list(hw.nics),
        "nic_count": len(hw.nics),
        "groups": list(host.groups),
        "vars": dict(host.vars),
    }


def find_profile(name: str, profiles_dir: Path | None = None, kind: str = "BIOS profile") -> Path:
    """A profile name (``epyc-gpudirect``) or a path to a ``.yaml.j2`` file (``kind`` names it in errors; the
    host OS pipeline passes its own profiles_dir and kind). Without profiles_dir: the project's bios/profiles
    first, then the built-in ones (numaforge.paths)."""
    dirs = [Path(profiles_dir)] if profiles_dir else (paths.data_dirs("bios", "profiles") or [default_profiles_dir()])
    if name.endswith((".j2", ".yaml", ".yml")) or "/" in name:
        p = Path(name)
        if p.is_file():
            return p
        if os.path.lexists(p):  # there, but a directory, a device, a FIFO, a dangling link: say which
            safeio.check_input(
                p, what=kind, error=ProfileError, max_bytes=MAX_PROFILE_BYTES, fix_kind="name a .yaml.j2 file"
            )
        raise ProfileError(f"{kind} file {name} does not exist", name, "check the path")
    for d in dirs:
        p = d / f"{name}.yaml.j2"
        if p.is_file():
            return p
    known = sorted({f.name[: -len(".yaml.j2")] for d in dirs for f in d.glob("*.yaml.j2")})
    close = difflib.get_close_matches(name, known, n=1)
    fix = f"did you mean '{close[0]}'?" if close else f"known profiles: {', '.join(known) or 'none'}"
    raise ProfileError(f"unknown {kind} '{name}'", ", ".join(str(d) for d in dirs), fix)


def _template_line(exc: BaseException, filename: str) -> int | None:
    line = getattr(exc, "lineno", None)
    if line:
        return line
    tb = exc.__traceback__
    found = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            found = tb.tb_lineno
        tb = tb.tb_next
    return found


class _StatLoader(jinja2.FileSystemLoader):
    """FileSystemLoader whose cached templates are reused only while the file keeps its inode, size and
    nanosecond mtime (jinja2's own check compares float seconds)."""

    def get_source(self, environment, template):
        for base in self.searchpath:  # the one checked reader first: a profile is a small regular file
            candidate = os.path.join(base, template)
            if os.path.lexists(candidate):
                safeio.check_input(
                    candidate,
                    what="profile",
                    error=ProfileError,
                    max_bytes=MAX_PROFILE_BYTES,
                    fix_kind="a profile is a regular .yaml.j2 file",
                    fix_size="a profile is a hand-written template of a few KiB",
                )
                break
        source, filename, _uptodate = super().get_source(environment, template)
        stamp = file_stamp(filename)

        def uptodate() -> bool:
            return file_stamp(filename) == stamp

        return source, filename, uptodate


_ENVIRONMENTS: dict[str, ImmutableSandboxedEnvironment] = {}
_ENV_LOCK = threading.Lock()


def template_environment(directory: str) -> ImmutableSandboxedEnvironment:
    """The sandbox every profile template (BIOS and host OS) renders in: one environment per profile directory
    and process, so a template is compiled once per run (a fleet renders it once per host, with its facts)."""
    with _ENV_LOCK:
        env = _ENVIRONMENTS.get(directory)
        if env is None:
            env = _ENVIRONMENTS[directory] = budgeted.BudgetedSandbox(
                loader=_StatLoader(directory),
                undefined=jinja2.StrictUndefined,
                keep_trailing_newline=True,
                trim_blocks=True,
                lstrip_blocks=True,
                autoescape=False,
                auto_reload=True,
            )
        return env


def render_text(path: Path, facts: dict[str, Any]) -> str:
    """Render one template file with StrictUndefined in jinja2's immutable sandbox (a profile is data: it
    cannot call methods that reach Python internals or mutate facts); errors carry file:line."""
    env = template_environment(str(path.parent))
    if not os.access(path, os.R_OK):
        raise ProfileError("cannot read profile", str(path), "check the file permissions")
    try:
        template = env.get_template(path.name)
    except jinja2.TemplateSyntaxError as exc:
        raise ProfileError(
            f"template syntax error: {exc.message}", f"{path}:{exc.lineno}", "fix the Jinja2 syntax at that line"
        ) from None
    try:
        return budgeted.render(template, facts)
    except budgeted.RenderBudgetExceeded as exc:
        raise budget_error(exc, template, path) from None
    except EXPRESSION_ERRORS as exc:
        raise expression_error(exc, template, path) from None
    except SecurityError as exc:
        line = _template_line(exc, template.filename)
        where = f"{path}:{line}" if line else str(path)
        raise ProfileError(
            f"profile tried something the template sandbox forbids ({exc})",
            where,
            "a profile may only read facts and compute values: remove the attribute/method access",
        ) from None
    except jinja2.UndefinedError as exc:
        line = _template_line(exc, template.filename)
        where = f"{path}:{line}" if line else str(path)
        raise ProfileError(
            f"template uses an undefined value: {exc.message}",
            where,
            f"profiles can use: {', '.join(sorted(facts))} (guard optional ones with `is defined`)",
        ) from None
    except jinja2.TemplateError as exc:
        line = _template_line(exc, template.filename)
        where = f"{path}:{line}" if line else str(path)
        raise ProfileError(f"template failed: {exc}", where, "fix the template expression") from None


# what a template expression can raise from Python itself ({{ 4 // 0 }}, {{ 'a' + 1 }}, a macro calling itself):
# the template's fault, said with its file:line -- these were "internal error (a bug)" exits (issue 25 item 8)
EXPRESSION_ERRORS = (ArithmeticError, RecursionError, TypeError, ValueError, LookupError)


def expression_error(exc: BaseException, template, path: Path) -> ProfileError:
    """The ProfileError for a template expression Python refused (division by zero, endless recursion...)."""
    line = _template_line(exc, template.filename)
    if isinstance(exc, RecursionError):
        what = "a macro or loop in the profile calls itself without end (RecursionError)"
        fix = "give the recursive macro a condition that stops it, or compute the value without recursion"
    elif isinstance(exc, ZeroDivisionError):
        what = f"the profile divides by zero ({exc})"
        fix = "guard the divisor (e.g. {% if n %}...{% endif %}) or check the fact it comes from"
    else:
        what = f"a template expression failed: {type(exc).__name__}: {exc}"
        fix = "fix the expression at that line (types: facts are numbers, strings, lists and mappings)"
    return ProfileError(what, f"{path}:{line}" if line else str(path), fix)


def budget_error(exc: BaseException, template, path: Path) -> ProfileError:
    """The ProfileError for a template past its render budget (numaforge.bios.budgeted), with file:line."""
    line = _template_line(exc, template.filename)
    return ProfileError(
        f"profile went past its render budget: {exc}",
        f"{path}:{line}" if line else str(path),
        "a profile computes a few settings from facts: remove the large loop, range or repetition",
    )


def _key_lines(doc) -> dict[tuple, int]:
    """Line (1-based, in the rendered text) of every mapping key path, for error messages."""
    lines: dict[tuple, int] = {}

    def walk(node, path: tuple):
        if isinstance(node, yamlsrc.LMap):
            for k, v in node.items():
                lines[path + (str(k),)] = node.line_of(k)
                walk(v, path + (str(k),))

    walk(doc, ())
    return lines


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
    rendered = text.splitlines()

    def locate(line: int) -> str:
        snippet = rendered[line - 1].strip() if 0 < line <= len(rendered) else ""
        return f"{path} (rendered line {line}: {snippet!r})"

    doc = yamlsrc.parse(text, str(path), error=ProfileError, locate=locate, syntax="rendered profile is not valid YAML")
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ProfileError(
            "a profile must render to a mapping (description/extends/settings/raw)",
            str(path),
            "start the profile with `settings:`",
        )
    lines = _key_lines(doc)
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
    current = name
    while current is not None:
        path = find_profile(current, profiles_dir)
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
        profiles_dir = path.parent  # a parent is looked up next to its child
    settings: dict[str, Any] = {}
    origin: dict[str, str] = {}
    optional: set[str] = set()
    raw: dict[str, dict[str, Any]] = {}
    for pname, _path, doc in reversed(chain):  # parent first, child last wins
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
    )


def _profile_name(path: Path) -> str:
    return re.sub(r"\.ya?ml(\.j2)?$", "", path.name)
