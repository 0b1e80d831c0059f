"""Exact p-values and the power the probe studies had (issue 42 item 6), from the stored study files.

    .venv/bin/python bench/numa_effect_power.py [docs/numa-effect/study/*.json] [--md OUT.md]
        # default: every study there but amendment 8's matrix (finished_studies)
    .venv/bin/python bench/numa_effect_power.py --pilot PILOT.json... [--md OUT.md]

``--pilot`` (protocol amendment 8, issue 42): from pilot studies of any number of blocks (>= 2), per case, patched
arm and one-sided non-inferiority endpoint (NI_MARGINS: locality -5 points, load-balancer returns +0.25 /min, time
to 90 % +10 s, pages migrated +25 % of off's mean) the SD of the paired differences and the blocks for 80 % power at
a true difference of 0, ((z_0.95 + z_0.80) * sd / margin)**2; per case max(20, the largest), at most 100.

Reads each study with numaforge.measure.study.read and pairs every arm with the study's base arm exactly as the
reports do (numaforge.measure.runner.report: the base is `off`, else the first arm; paired.differences per
endpoint; the TOST margins of scenario.MARGINS / MULTI_MARGINS through metrics.margin). Nothing is re-run and no
study file is written. For every endpoint with a margin it prints:

- ``p exact``: the two-sided sign-flip p-value over all 2**n sign patterns; the reports' p (paired.sign_flip_p)
  is the same (enumerated up to paired.EXACT_MAX blocks, above that counted on the data's decimal grid; before
  issue 42 it counted only up to 14 blocks and above that printed a seeded Monte Carlo p, whose floor at 20,000
  patterns is 1/20,001 = 5e-05);
- ``Holm``: the exact p-values Holm-adjusted over the case's registered secondaries (paired.holm), as the reports
  adjust theirs;
- ``non-inferior``: one-sided non-inferiority at 5 % within the same margin: the harmful-side bound of the
  90 % bootstrap interval (paired.interval, the interval paired.tost uses) is inside the margin (below +margin where
  lower is better, above -margin where higher is better);
- ``sd``: the standard deviation of the paired differences;
- ``power@n``: the power the n blocks had to show equivalence within the margin (both one-sided tests at 5 %)
  if the true difference is 0, normal approximation: 2 * Phi(margin * sqrt(n) / sd - z_0.95) - 1;
- ``blocks for 80 %``: the blocks that power needs: (z_0.95 + z_0.90)**2 * sd**2 / margin**2 for a true
  difference of 0, and (z_0.95 + z_0.80)**2 * sd**2 / (margin - |mean|)**2 if the true difference is the
  observed mean (infinite when the mean is outside the margin).

The normal approximation is the textbook TOST sample-size formula (Chow, Shao and Wang, "Sample Size Calculations
in Clinical Research", 3.2); paired.tost itself uses a bootstrap interval, so these are planning numbers, not a
re-decision of any verdict.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from statistics import NormalDist, fmean, stdev

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from numaforge.measure import decision, metrics, paired, scenario, study

Z = NormalDist()
Z95, Z90, Z80 = Z.inv_cdf(0.95), Z.inv_cdf(0.90), Z.inv_cdf(0.80)


def exact_sign_flip_p(d: list[float]) -> float:
    """paired.sign_flip_p's statistic and tolerance, every one of the 2**n sign patterns counted (paired's own
    counting, whatever the number of blocks)."""
    obs = abs(sum(d)) - 1e-9 * (1 + sum(abs(x) for x in d))
    return paired._exact_hits(d, obs) / 2 ** len(d)


def power_at(n: int, sd: float, margin: float) -> float:
    if sd == 0:
        return 1.0
    return max(0.0, 2 * Z.cdf(margin * math.sqrt(n) / sd - Z95) - 1)


def blocks_needed(sd: float, margin: float, mean: float = 0.0) -> float:
    if sd == 0:
        return 0.0
    if mean == 0.0:
        return (Z95 + Z90) ** 2 * sd**2 / margin**2
    if abs(mean) >= margin:
        return math.inf
    return (Z95 + Z80) ** 2 * sd**2 / (margin - abs(mean)) ** 2


# protocol amendment 8 (issue 42): its one-sided non-inferiority endpoints and margins (defined once, beside the
# other registered margins, for its rule in numaforge.measure.decision too), and its block-count rule
NI_MARGINS = scenario.NI_MARGINS
MIN_CASE_BLOCKS, MAX_CASE_BLOCKS = 20, 100


def ni_blocks(sd: float, margin: float) -> int:
    """Blocks for 80 % power of a one-sided 5 % non-inferiority test at a true difference of 0 (normal
    approximation): ((z_0.95 + z_0.80) * sd / margin) ** 2, rounded up."""
    return math.ceil(((Z95 + Z80) * sd / margin) ** 2)


def pilot_rows(path: Path) -> list[dict]:
    """Amendment 8's block count from a pilot study (any number of blocks >= 2): per case, patched arm and
    non-inferiority endpoint the SD of the paired differences arm - off and ni_blocks(); per case the count is
    max(MIN_CASE_BLOCKS, the largest of those), capped at MAX_CASE_BLOCKS."""
    settings, _chunks, blocks = study.read(path)
    out = []
    for case, bl in blocks.items():
        runs = [r for b in bl for r in b]
        arms = list(dict.fromkeys(settings.get("arms") or [r.label for r in runs]))
        base = "off" if "off" in arms else arms[0]
        for arm in [a for a in arms if a != base]:
            for key in NI_MARGINS:
                vals = {a: {r.round: getattr(r, key) for r in runs if r.label == a} for a in (base, arm)}
                d = paired.differences(vals[base], vals[arm])
                m = metrics.margin(key, vals[base].values(), NI_MARGINS)
                if len(d) < 2 or not m:
                    continue
                sd = stdev(d)
                out.append(
                    {
                        "study": path.name,
                        "case": case,
                        "arm": arm,
                        "key": key,
                        "n": len(d),
                        "mean": fmean(d),
                        "sd": sd,
                        "margin": m,
                        "blocks": ni_blocks(sd, m),
                    }
                )
    return out


def case_blocks(prows: list[dict]) -> dict[tuple[str, str], int]:
    """{(study, case): amendment 8's block count} from pilot_rows()."""
    need: dict[tuple[str, str], int] = {}
    for r in prows:
        k = (r["study"], r["case"])
        need[k] = max(need.get(k, MIN_CASE_BLOCKS), r["blocks"])
    return {k: min(v, MAX_CASE_BLOCKS) for k, v in need.items()}


def pilot_markdown(prows: list[dict]) -> str:
    lines = [
        "| study | case | arm - off | endpoint | pilot blocks | mean | sd | margin (one-sided) | blocks for 80 % |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in prows:
        lines.append(
            f"| {r['study']} | {r['case']} | {r['arm']} | {r['key']} | {r['n']} | {r['mean']:+.3g} | {r['sd']:.3g} "
            f"| {r['margin']:.3g} | {r['blocks']:,} |"
        )
    lines += ["", "| study | case | blocks (amendment 8: max(20, largest above), at most 100) |", "|---|---|---|"]
    lines += [f"| {s} | {c} | {n} |" for (s, c), n in case_blocks(prows).items()]
    return "\n".join(lines) + "\n"


STUDY_DIR = Path(__file__).resolve().parent.parent / "docs" / "numa-effect" / "study"


def finished_studies(directory: Path = STUDY_DIR) -> list[Path]:
    """The study files the table covers: every one in ``directory`` but a study of amendment 8's cases (the
    configuration matrix, decision.registered_case): its block counts and their power are the amendment's, and its
    report (`numa_effect.py control`) judges a case at its registered n, so no interim pool of it is tabled here."""
    out = []
    for path in sorted(directory.glob("*.json")):
        settings, _chunks, blocks = study.read(path)
        if not any(decision.registered_case(settings, case) for case in blocks):
            out.append(path)
    return out


def rows(path: Path) -> list[dict]:
    settings, _chunks, blocks = study.read(path)
    out = []
    for case, bl in blocks.items():
        runs = [r for b in bl for r in b]
        multi = case in scenario.UNIT_CASES
        outcomes = scenario.MULTI_OUTCOMES if multi else scenario.OUTCOMES
        margins = scenario.MULTI_MARGINS if multi else scenario.MARGINS
        arms = list(dict.fromkeys(settings.get("arms") or [r.label for r in runs]))
        base = "off" if "off" in arms else arms[0]
        for arm in arms:
            if arm == base:
                continue
            for key, _label, unit, lower in outcomes:
                vals = {a: {r.round: getattr(r, key) for r in runs if r.label == a} for a in (base, arm)}
                d = paired.differences(vals[base], vals[arm])
                m = metrics.margin(key, vals[base].values(), margins)
                if len(d) < paired.MIN_BLOCKS:
                    continue
                sd = stdev(d) if len(d) > 1 else 0.0
                row = {
                    "study": path.name,
                    "case": case,
                    "arm": arm,
                    "base": base,
                    "key": key,
                    "unit": unit,
                    "n": len(d),
                    "mean": fmean(d),
                    "sd": sd,
                    "p_exact": exact_sign_flip_p(d),
                    "p_report": paired.sign_flip_p(d),
                    "margin": m,
                }
                if m and lower is not None:
                    lo, hi = paired.interval(d, level=0.90)  # its one-sided 95 % bounds, as paired.tost uses them
                    row["ni_bound"] = hi if lower else lo
                    row["non_inferior"] = hi < m if lower else lo > -m
                if m:
                    row["power"] = power_at(len(d), sd, m)
                    row["need0"] = blocks_needed(sd, m)
                    row["need_obs"] = blocks_needed(sd, m, fmean(d))
                out.append(row)
    # Holm over the registered secondaries of each arm, as runner.report adjusts them, on the exact p-values
    for arm in {r["arm"] for r in out}:
        for case in {r["case"] for r in out}:
            fam = [r for r in out if r["arm"] == arm and r["case"] == case and r["key"] in secondary_of(case)]
            adj = paired.holm({r["key"]: r["p_exact"] for r in fam})
            for r in fam:
                r["p_holm"] = adj[r["key"]]
    return out


def secondary_of(case: str) -> tuple[str, ...]:
    return scenario.MULTI_SECONDARY if case in scenario.UNIT_CASES else scenario.SECONDARY


def fmt_p(p: float) -> str:
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def fmt_n(x: float | None) -> str:
    if x is None:
        return ""
    return "never (mean outside the margin)" if math.isinf(x) else f"{math.ceil(x):,}"


def markdown(all_rows: list[dict]) -> str:
    lines = [
        "| study | case | arm - base | endpoint | n | mean | sd | p exact (report's) | Holm (exact) | margin "
        "| non-inferior (one-sided bound) | power at n (true diff 0) | blocks for 80 % (true diff 0 / = observed mean) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in all_rows:
        margin = f"+-{r['margin']:.3g}" if r.get("margin") else "-"
        power = f"{100 * r['power']:.0f} %" if "power" in r else "-"
        ni = f"{'yes' if r['non_inferior'] else 'no'} ({r['ni_bound']:+.3g})" if "ni_bound" in r else "-"
        need = f"{fmt_n(r.get('need0'))} / {fmt_n(r.get('need_obs'))}" if "need0" in r else "-"
        lines.append(
            f"| {r['study']} | {r['case']} | {r['arm']} - {r['base']} | {r['key']} | {r['n']} | {r['mean']:+.3g} "
            f"| {r['sd']:.3g} | {fmt_p(r['p_exact'])} ({fmt_p(r['p_report'])}) "
            f"| {fmt_p(r['p_holm']) if 'p_holm' in r else '-'} | {margin} | {ni} | {power} | {need} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("studies", nargs="*", type=Path)
    ap.add_argument("--md", type=Path, help="write the table here (default: print it)")
    ap.add_argument(
        "--pilot", action="store_true", help="pilot studies: amendment 8's block count per case from the paired SDs"
    )
    args = ap.parse_args(argv)
    if args.pilot:
        if not args.studies:
            ap.error("--pilot: give the pilot study files")
        return _emit(pilot_markdown([r for p in args.studies for r in pilot_rows(p)]), args.md)
    paths = args.studies or finished_studies()
    all_rows = [r for p in paths for r in rows(p)]
    return _emit(markdown(all_rows), args.md)


def _emit(text: str, md: Path | None) -> int:
    """The markdown into ``md`` (saying so), else on stdout."""
    if md:
        md.write_text(text)
        print(f"wrote {md}")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
