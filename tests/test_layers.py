"""The package's layers stay one-way (docs/architecture.md): cli -> pipelines -> transports -> basics.

Every import in numaforge/ (module level and function-local alike) is read with ast and checked against the
table below, so a new upward or sideways import fails here with the file and line, not in review.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1] / "numaforge"

BASICS = {
    "__version__",
    "budget",
    "debian_apt",
    "defaults",
    "digest",
    "display",
    "errors",
    "filelock",
    "fleet",
    "journal",
    "hostlock",
    "lazy",
    "paths",
    "program",
    "report",
    "safeio",
    "waits",
    "watchedhttp",
    "secrets",
    "templating",
    "textsafe",
    "budgeted",
    "workload",
    "yamlsrc",
}
TRANSPORTS = {"inventory", "remote"}  # the host model and the SSH transport (Redfish's lives in bios/redfish.py)
PIPELINES = {"audit", "bios", "canary", "doctor", "facts", "hostos", "kernel", "lab", "livepatch", "measure"}
TOP = {"cli"}

# the only edges between pipelines, each with its reason
PIPELINE_EDGES = {
    ("audit", "facts"): "the audit reads the facts' parsers",
    ("audit", "hostos"): "the audit reuses the host OS reads (zone_reclaim_mode, THP, governor)",
    ("canary", "audit"): "the SLO gate's rollback captures each canary with numa-audit's read",
    ("canary", "hostos"): "the SLO gate reads numastat through the host OS snapshot (host_root, locality_counters)",
    ("hostos", "facts"): "the host OS plan checks devices against the facts",
    ("hostos", "bios"): "the host OS checks need the BIOS profile's NPS (bios.profile.render_profile)",
    ("bios", "facts"): "bios-verify compares the BIOS with what the OS shows",
    ("livepatch", "measure"): "validate --measure runs the measurement arms",
    ("measure", "kernel"): "the arms build kpatch modules",
    ("lab", "kernel"): "the lab VM boots the lab kernel the kernel pipeline builds",
    ("doctor", "kernel"): "doctor --strict checks the kernel targets' tools and caches",
    ("doctor", "lab"): "doctor --strict checks the lab kernel cache",
}


def _layer(top: str) -> str:
    for name, members in (("basics", BASICS), ("transports", TRANSPORTS), ("pipelines", PIPELINES), ("top", TOP)):
        if top in members:
            return name
    raise AssertionError(f"numaforge.{top} is in no layer: add it to tests/test_layers.py and docs/architecture.md")


def _imports() -> Iterator[tuple[str, str, str]]:
    """(importing top-level name, imported top-level name, file:line) for every numaforge import."""
    for f in sorted(ROOT.rglob("*.py")):
        rel = f.relative_to(ROOT)
        if "dmtf" in rel.parts:
            continue
        parts = list(rel.with_suffix("").parts)
        pkg = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        me = parts[0] if parts else "__init__"
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if not isinstance(node, (ast.ImportFrom, ast.Import)):
                continue
            targets: list[list[str]] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else pkg
                    mod = base + (node.module.split(".") if node.module else [])
                elif node.module and node.module.split(".")[0] == "numaforge":
                    mod = node.module.split(".")[1:]
                else:
                    continue
                targets = [mod] if mod else [[a.name] for a in node.names]
            else:
                targets = [a.name.split(".")[1:] for a in node.names if a.name.startswith("numaforge.")]
            for t in targets:
                if t and t[0] != me and me != "__init__":
                    yield me, t[0], f"numaforge/{rel}:{node.lineno}"


ORDER = {"basics": 0, "transports": 1, "pipelines": 2, "top": 3}


def test_every_import_goes_down_a_layer_or_along_a_listed_edge():
    bad = []
    for me, other, where in _imports():
        lm, lo = _layer(me), _layer(other)
        if other in TOP:
            bad.append(f"{where}: {me} imports {other} (nothing imports the CLI)")
        elif lm == lo == "pipelines":
            if (me, other) not in PIPELINE_EDGES:
                bad.append(f"{where}: pipeline {me} imports pipeline {other} (not a listed edge)")
        elif ORDER[lo] > ORDER[lm]:
            bad.append(f"{where}: {me} ({lm}) imports {other} ({lo}), a higher layer")
    assert not bad, "\n".join(bad)


def test_the_listed_pipeline_edges_are_all_used():
    used = {(me, other) for me, other, _ in _imports()}
    assert set(PIPELINE_EDGES) <= used, sorted(set(PIPELINE_EDGES) - used)


def test_the_checker_sees_function_local_and_relative_imports(tmp_path):
    """The walk must see what a reviewer would flag: a relative import two levels up inside a function."""
    found = {(me, other) for me, other, where in _imports() if where.startswith("numaforge/cli/")}
    assert ("cli", "bios") in found and ("cli", "errors") in found


def test_every_module_is_in_the_architecture_doc():
    """docs/architecture.md's tree names every module (file name, or the package directory for __init__.py)."""
    doc = (ROOT.parent / "docs" / "architecture.md").read_text()
    tree = doc[doc.index("## Where each piece lives") : doc.index("## Rules the code follows")]
    missing = []
    for f in sorted(ROOT.rglob("*.py")):
        rel = f.relative_to(ROOT)
        if "dmtf" in rel.parts or "__pycache__" in rel.parts:
            continue
        token = f"{f.parent.name}/" if f.name == "__init__.py" else f.name
        if token not in tree:
            missing.append(f"numaforge/{rel}")
    assert not missing, f"add to docs/architecture.md ('Where each piece lives'): {', '.join(missing)}"
