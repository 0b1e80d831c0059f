"""Shared by the host OS tests: corpora, a host tree built from a captured snapshot, inventory hosts."""

from __future__ import annotations

from pathlib import Path

from numaforge.hostos.read import parse_snapshot
from numaforge.inventory.model import HardwareSpec, Host, Location

DATA = Path(__file__).resolve().parents[1] / "data" / "hostos"


def corpus(name: str) -> str:
    return (DATA / f"{name}.snapshot").read_text()


def build_tree(root: Path, name: str = "lab-vm-numanic") -> Path:
    """Materialise a captured snapshot as files under root (the boundary fake of /proc and /sys for SSH hosts:
    a test must not retune the build server's own kernel, and sysfs cannot be created by a test)."""
    snap = parse_snapshot(corpus(name))
    for path, content in snap.files.items():
        p = root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content + "\n")
    for path, entries in snap.dirs.items():
        d = root / path.lstrip("/")
        d.mkdir(parents=True, exist_ok=True)
        for e in entries:
            (d / e).touch()
    root.chmod(0o755)
    return root


def lab_like_host(name: str = "h", nics=("0000:21:04.0",), sockets: int = 4, **vars) -> Host:
    return Host(
        name=name,
        location=Location("<test>"),
        hardware=HardwareSpec(sockets=sockets, nics=list(nics)),
        vars={"hostos_profile": "lab-vm-host", **vars},
    )
