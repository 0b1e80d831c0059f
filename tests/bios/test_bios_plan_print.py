"""The plan table prints what the BMC sent (attribute names, values, DisplayNames in `resolved`) as text: a
DisplayName that looks like rich markup is shown literally, never interpreted."""

from __future__ import annotations

from rich.console import Console

from numaforge.cli import bios, common
from numaforge.report import HostResult, Report


def test_bmc_text_in_the_plan_table_is_escaped(monkeypatch):
    out = Console(record=True, width=200, color_system=None)
    monkeypatch.setattr(common, "console", out)
    r = HostResult("gpu-01")
    r.data.update(
        {
            "vendor": "generic",
            "profile": "p",
            "registry": "Reg[bold]X[/bold]",
            "plan": [
                {
                    "attribute": "Q1[/]",
                    "setting": "pcie_acs",
                    "current": "[red]on[/red]",
                    "pending": None,
                    "desired": "Off",
                    "action": "change",
                    "resolved": "by display name: /ACS/ matched '[link=x]ACS[/link]'",
                },
                {
                    "attribute": "-",
                    "setting": "memory_interleaving",
                    "current": None,
                    "pending": None,
                    "desired": None,
                    "action": "gap",
                    "resolved": "platform gap on Gen11: none",
                },
            ],
        }
    )
    bios._print_plans(Report("bios-plan", hosts=[r]))
    text = out.export_text()
    assert "Q1[/]" in text and "[red]on[/red]" in text and "'[link=x]ACS[/link]'" in text
    assert "Reg[bold]X[/bold]" in text and "gap" in text


def _host(name: str, current: str) -> HostResult:
    r = HostResult(name)
    r.data.update(
        {
            "vendor": "generic",
            "profile": "p",
            "registry": "R.v1",
            "plan": [
                {
                    "attribute": "Q0100",
                    "setting": "nps",
                    "current": current,
                    "pending": None,
                    "desired": "NPS4",
                    "action": "change" if current != "NPS4" else "ok",
                    "resolved": "map",
                }
            ],
        }
    )
    return r


def test_alike_hosts_share_one_plan_table_titled_with_all_their_names(monkeypatch):
    """A homogeneous fleet prints one table per distinct plan, not one per host; no host goes unnamed."""
    out = Console(record=True, width=400, color_system=None)
    monkeypatch.setattr(common, "console", out)
    hosts = [_host(f"bmc{i:03d}", "NPS1") for i in range(5)] + [_host("odd-one", "NPS4"), _host("bmc007", "NPS1")]
    bios._print_plans(Report("bios-apply", hosts=hosts))
    text = out.export_text()
    assert text.count("Q0100") == 2  # two distinct plans -> two tables
    assert "6 hosts (bmc000..bmc004, bmc007): generic / profile p / registry R.v1" in text
    assert "odd-one: generic / profile p / registry R.v1" in text


def test_fold_names_keeps_every_name_and_order():
    assert bios.fold_names([f"n{i:02d}" for i in range(1, 13)]) == "n01..n12"
    assert bios.fold_names(["a1", "a2", "a4", "b", "c9", "c10"]) == "a1, a2, a4, b, c9, c10"
    assert bios.fold_names(["x7", "x8"]) == "x7, x8"
    assert bios.fold_names(["gpu-01"]) == "gpu-01"
