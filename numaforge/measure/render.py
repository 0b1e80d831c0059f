"""Tables and pictures of measurement reports (runner.report() dicts, one per topology/workload "case").

``table_rows(case)`` -> rows for a text/markdown table: per metric, each arm's median [95% interval] and its
verdict against "off" (from paired per-round differences, numaforge.measure.paired); ``verdict_lines`` spells
the paired difference, its interval and p out. ``markdown(cases)`` renders them; ``plot(cases, path)`` writes a PNG with the per-round
values of every arm (one row of panels per case), using matplotlib's non-interactive Agg backend.
"""

from __future__ import annotations

from pathlib import Path

from . import metrics, paired

PLOTTED = ("cross_numa_rate", "mean_latency_us", "local_ratio", "third_not_closer")


def fmt(v: float | None, unit: str = "") -> str:
    if v is None:
        return "-"
    s = f"{v:.1f}" if abs(v) < 1000 else f"{v:,.0f}"
    return s + ("%" if unit == "%" else "")


def cell(summary: dict | None, unit: str = "") -> str:
    if not summary:
        return "-"
    lo, hi = summary["ci"]
    return f"{fmt(summary['median'], unit)} [{fmt(lo, unit)}, {fmt(hi, unit)}]"


def table_rows(case: dict, keys=None, outcomes=None) -> list[list[str]]:
    """[[metric, arm1 cell, arm2 cell (verdict), ...], ...] for one runner.report() dict (outcomes: another
    endpoint list, e.g. numaforge.measure.scenario.OUTCOMES)."""
    arms = case["arms"]
    rows = []
    for key, label, unit, _lower in outcomes or metrics.OUTCOMES:
        if keys and key not in keys:
            continue
        per = case["metrics"].get(key, {})
        row = [f"{label}" + (f" ({unit})" if unit and unit != "%" else "")]
        for a in arms:
            c = cell(per.get(a), unit)
            verdict = case["verdicts"][key].get(a) if a != case.get("base", "off") and per.get(a) else None
            if verdict and verdict != paired.DESCRIPTIVE:
                c += f" ({verdict})"
            row.append(c)
        rows.append(row)
    return rows


def verdict_lines(case: dict, arm: str, keys=None, outcomes=None) -> list[str]:
    """'label: verdict: mean paired difference [95 % interval] over n rounds, p=...' per outcome of `arm`
    against the case's base (numaforge.measure.paired); the primary endpoint first and marked."""
    primary = case.get("primary")
    out = []
    order = sorted(outcomes or metrics.OUTCOMES, key=lambda o: o[0] != primary)
    for key, label, _unit, _lower in order:
        if keys and key not in keys:
            continue
        p = (case.get("paired", {}).get(key) or {}).get(arm)
        if p:
            out.append(f"{label}{' (primary)' if key == primary else ''}: {p['line']}")
    return out


def markdown(case: dict, keys=None, outcomes=None) -> str:
    arms = case["arms"]
    head = "| metric | " + " | ".join(arms) + " |\n|---|" + "---|" * len(arms) + "\n"
    return head + "".join("| " + " | ".join(r) + " |\n" for r in table_rows(case, keys, outcomes))


def headline(cases: dict[str, dict], arm: str = "winner", control: str = "null") -> str:
    """Markdown table beside the talk's claim: per case, cross-NUMA migration rate and mean latency off -> arm
    (median [95% interval]) with the verdict, and the null control's verdict for the same metric."""
    out = [
        "| case | cross-NUMA migration rate: off -> " + arm + " | verdict | null control | "
        "mean latency (us): off -> " + arm + " | verdict | null control |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, c in cases.items():
        row = [name]
        for key, unit in (("cross_numa_rate", "%"), ("mean_latency_us", "")):
            per, ver = c["metrics"].get(key, {}), c["verdicts"].get(key, {})
            row.append(f"{cell(per.get('off'), unit)} -> {cell(per.get(arm), unit)}")
            row.append(ver.get(arm, "n/a"))
            row.append(f"{cell(per.get(control), unit)} ({ver[control]})" if control in ver else "not run")
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out) + "\n"


def plot(cases: dict[str, dict], path: str | Path, keys=PLOTTED) -> Path:
    """PNG of per-round values: one row per case (e.g. "nps2 single"), one panel per metric, one column of
    points per arm with its median marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {k: (lab, unit) for k, lab, unit, _ in metrics.OUTCOMES}
    names = list(cases)
    fig, axes = plt.subplots(len(names), len(keys), figsize=(3.6 * len(keys), 2.6 * len(names)), squeeze=False)
    for i, name in enumerate(names):
        case = cases[name]
        arms = case["arms"]
        for j, key in enumerate(keys):
            ax = axes[i][j]
            per = case["metrics"].get(key, {})
            for x, a in enumerate(arms):
                s = per.get(a)
                if not s:
                    continue
                vals = s["values"]
                jitter = [x + (k - (len(vals) - 1) / 2) * (0.5 / max(1, len(vals))) for k in range(len(vals))]
                ax.scatter(jitter, vals, s=10, alpha=0.7)
                ax.hlines(s["median"], x - 0.3, x + 0.3, colors="black")
                ax.vlines(x, s["ci"][0], s["ci"][1], colors="black", linewidth=3, alpha=0.4)
            ax.set_xticks(range(len(arms)))
            ax.set_xticklabels(arms, fontsize=7, rotation=20)
            lab, unit = labels[key]
            ax.set_title(f"{name}: {lab}" + (f" ({unit})" if unit else ""), fontsize=8)
            ax.tick_params(axis="y", labelsize=7)
    return save_png(fig, path)


def save_png(fig, path: str | Path) -> Path:
    """Write a matplotlib figure to `path` atomically (a temporary file renamed over it) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    tmp.replace(path)
    return path
