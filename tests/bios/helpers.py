"""Shared test helpers for the BIOS tests: inventory objects and fixture data paths."""

from __future__ import annotations

import json
from pathlib import Path

from numaforge.bios.registry import Registry
from numaforge.inventory.model import BMCSpec, HardwareSpec, Host, Location

DATA = Path(__file__).resolve().parents[1] / "data" / "bios"
PROFILES = DATA / "profiles"


def registry(name: str) -> Registry:
    return Registry.from_json(json.loads((DATA / name).read_text()))


def facts(**over):
    f = {
        "host": "gpu-01",
        "vendor": "dell",
        "model": "PowerEdge R7525",
        "sockets": 2,
        "cpu_model": "EPYC 7763",
        "gpus": ["0000:41:00.0"],
        "gpu_count": 1,
        "nics": ["0000:81:00.0"],
        "nic_count": 1,
        "groups": [],
        "vars": {},
    }
    f.update(over)
    return f


def host(
    name="gpu-01",
    url="https://127.0.0.1:1",
    vendor="auto",
    hw_vendor=None,
    profile="epyc-gpudirect",
    password=None,
    ca_bundle=None,
    gpus=("0000:41:00.0",),
    insecure=False,
    system_id=None,
    auth="auto",
) -> Host:
    return Host(
        name=name,
        location=Location("inventory/test.yaml", 1),
        bmc=BMCSpec(
            url=url,
            username="admin",
            password=password,
            ca_bundle=ca_bundle,
            vendor=vendor,
            insecure=insecure,
            system_id=system_id,
            auth=auth,
        ),
        hardware=HardwareSpec(platform="test", vendor=hw_vendor, sockets=2, gpus=list(gpus)),
        bios_profile=profile,
    )
