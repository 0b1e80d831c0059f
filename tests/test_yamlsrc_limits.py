"""numaforge.yamlsrc's alias guard counts what aliases add, not what a document writes out (issue 43 item 6: a
10,000-host inventory written in full, about 260,000 values, was refused as an alias bomb), while a "billion
laughs" document still fails fast, naming the limit."""

from __future__ import annotations

import time

import pytest

from numaforge import yamlsrc
from numaforge.errors import NumaforgeError


def _fleet(hosts: int) -> str:
    lines = ["hosts:"]
    for i in range(hosts):
        lines += [
            f"  gpu{i:05d}:",
            f"    bmc: {{url: 'https://10.{i // 65536}.{i // 256 % 256}.{i % 256}', username: admin, "
            "password: 'env:BMC_PW', vendor: dell}",
            f"    ssh: {{address: 10.9.{i // 256 % 256}.{i % 256}, user: root}}",
            "    hardware: {platform: r7525, vendor: dell, sockets: 2, gpus: [0, 1, 2, 3]}",
            "    bios_profile: epyc-gpudirect",
        ]
    return "\n".join(lines) + "\n"


def test_a_large_inventory_written_out_in_full_is_no_alias_bomb():
    text = _fleet(10_000)
    assert len(text) < yamlsrc.MAX_BYTES
    doc = yamlsrc.parse(text, "fleet.yaml")
    assert len(doc["hosts"]) == 10_000 and doc["hosts"]["gpu09999"]["hardware"]["gpus"] == [0, 1, 2, 3]


BOMB = "\n".join(
    ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]" for i in range(8)]
)


def test_a_billion_laughs_still_fails_fast_naming_the_limit():
    t0 = time.monotonic()
    with pytest.raises(NumaforgeError, match=rf"expands to more than {yamlsrc.MAX_NODES} values through aliases"):
        yamlsrc.parse(BOMB, "bomb.yaml")
    assert time.monotonic() - t0 < 5


def test_aliases_up_to_the_limit_are_fine():
    text = "base: &b {x: 1, y: [1, 2, 3]}\n" + "\n".join(f"h{i}: *b" for i in range(1000))
    doc = yamlsrc.parse(text, "ok.yaml")
    assert doc["h999"] == {"x": 1, "y": [1, 2, 3]}
