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
    r.data.update({"vendor": "generic", "profile": "p", "registry": "Reg[bold]X[/bold]", "plan": [
        {"attribute": "Q1[/]", "setting": "pcie_acs", "current": "[red]on[/red]", "pending": None, "desired": "Off",
         "action": "change", "resolved": "by display name: /ACS/ matched '[link=x]ACS[/link]'"},
        {"attribute": "-", "setting": "memory_interleaving", "current": None, "pending": None, "desired": None,
         "action": "gap", "resolved": "platform gap on Gen11: none"}]})
    bios._print_plans(Report("bios-plan", hosts=[r]))
    text = out.export_text()
    assert "Q1[/]" in text and "[red]on[/red]" in text and "'[link=x]ACS[/link]'" in text
    assert "Reg[bold]X[/bold]" in text and "gap" in text
