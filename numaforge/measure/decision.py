"""The probe study's decision rules (docs/numa-effect-protocol.md, "Decision rules (fixed now)"), applied in order.

Pure: ``apply_rules`` takes the main case's and the source-busy control's reports (numaforge.measure.scenario
.report: paired verdicts against ``off``) and each design's code size, and returns every rule's finding per arm,
the arms each rule leaves, and the choice rule 5 makes with its basis. Nothing a failed earlier rule stops is
judged: if the null arm does not pass rule 1, no arm is.

One reading the registered text needs, fixed here before the study's result was computed: rule 4 says an arm
"does no harm when it is TOST-equivalent to `off` on every secondary", and rule 5 ships an arm that does no harm
*and* improves an outcome. Read literally, an improvement larger than its margin is not "equivalent" and so would
be harm. An endpoint shown "better" is shown not worse (its interval excludes 0 on the good side, so the harm-side
half of TOST holds), so "no harm" here is: every secondary "better" or TOST-equivalent, none "worse".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import paired
from .scenario import CONTROL_CASE, KNOB_CASE, MULTI_SECONDARY, PRIMARY, SECONDARY, UNIT_CASES

BASE, NULL = "off", "null"
LOCALITY, TIME_TO_90 = "local_share_30s", "time_to_90"


@dataclass
class Finding:
    rule: int
    arm: str
    holds: bool
    why: str


@dataclass
class Decision:
    findings: list[Finding] = field(default_factory=list)
    judged: bool = False  # rule 1 held
    candidates: list[str] = field(default_factory=list)  # designs meeting rules 1-3 that do no harm
    improving: list[str] = field(default_factory=list)  # of those, the ones that improve an outcome
    choice: str | None = None
    basis: str = "none"  # data | code | mechanism only | none
    statement: str = ""
    direct: dict[str, str] = field(default_factory=dict)  # "a vs b": paired locality line (rule 5)


def _pair(rep: dict, key: str, arm: str) -> dict:
    return (rep.get("paired", {}).get(key) or {}).get(arm) or {}


def _line(rep: dict, key: str, arm: str) -> str:
    return _pair(rep, key, arm).get("line") or rep.get("verdicts", {}).get(key, {}).get(arm) or "not run"


def _equivalent(rep: dict, key: str, arm: str) -> bool:
    return bool(_pair(rep, key, arm).get("equivalent"))


def _verdict(rep: dict, key: str, arm: str) -> str:
    return rep.get("verdicts", {}).get(key, {}).get(arm, "not run")


def no_harm(rep: dict, arm: str, secondary: tuple[str, ...] = SECONDARY) -> tuple[bool, str]:
    """Every secondary "better" or TOST-equivalent, none "worse" (the module docstring's reading of rule 4)."""
    bad = [k for k in secondary if not (_verdict(rep, k, arm) == paired.BETTER or _equivalent(rep, k, arm))]
    if not bad:
        return True, "every secondary better or TOST-equivalent"
    return False, "; ".join(f"{k}: {_line(rep, k, arm)}" for k in bad)


def improves(rep: dict, arm: str) -> tuple[bool, str]:
    """Locality or time to 90 % "better" (Holm-adjusted) and no secondary "worse"."""
    worse = [k for k in SECONDARY if _verdict(rep, k, arm) == paired.WORSE]
    better = [k for k in (LOCALITY, TIME_TO_90) if _verdict(rep, k, arm) == paired.BETTER]
    if better and not worse:
        return True, "better on " + ", ".join(better)
    return False, ("worse on " + ", ".join(worse)) if worse else "neither locality nor time to 90 % better"


def block_values(case: dict, arm: str, key: str) -> dict[int, float | None]:
    """{block: the arm's value of `key`} from a report's runs (the input of paired.differences)."""
    return {r["round"]: r.get(key) for r in case.get("runs", []) if r["label"] == arm}


def direct_locality(main: dict, a: str, b: str) -> paired.Comparison:
    """Rule 5's direct paired comparison: locality of a minus b over the blocks where both ran."""
    d = paired.differences(block_values(main, b, LOCALITY), block_values(main, a, LOCALITY))
    return paired.compare(d, lower_is_better=False)


def apply_rules(main: dict, busy: dict | None, code_lines: dict[str, int]) -> Decision:
    """Rules 1-5 in order over the design arms (every arm but off and null) of `main` (the source-spare case)
    and `busy` (its source-busy control; None: not run, so no design is cleared by rule 2)."""
    dec = Decision()
    designs = [a for a in main["arms"] if a not in (BASE, NULL)]
    ok1 = NULL in main["arms"] and _equivalent(main, PRIMARY, NULL) and _equivalent(main, LOCALITY, NULL)
    why1 = f"primary: {_line(main, PRIMARY, NULL)}; locality: {_line(main, LOCALITY, NULL)}"
    dec.findings.append(Finding(1, NULL, ok1, why1))
    if not ok1:
        dec.statement = "Rule 1 failed: the null arm is not shown equivalent to off, so no arm is judged."
        return dec
    dec.judged = True
    passing = []
    for arm in [NULL, *designs]:  # rule 2 names every patched arm; null's finding is reported, not used
        ok2 = busy is not None and _equivalent(busy, PRIMARY, arm)
        dec.findings.append(Finding(2, arm, ok2, _line(busy, PRIMARY, arm) if busy else "source-busy case not run"))
        if arm == NULL:
            continue
        ok3 = _verdict(main, PRIMARY, arm) == paired.BETTER
        dec.findings.append(Finding(3, arm, ok3, _line(main, PRIMARY, arm)))
        harmless, why_h = no_harm(main, arm)
        better, why_b = improves(main, arm)
        dec.findings.append(Finding(4, arm, harmless, f"no harm: {why_h}; improves: {why_b}"))
        if ok2 and ok3 and harmless:
            passing.append(arm)
            if better:
                dec.improving.append(arm)
    dec.candidates = passing
    return _choose(dec, main, code_lines)


def control_findings(case: str, rep: dict, topology: str | None = None) -> list[Finding]:
    """A control study's case judged by the rule the protocol gives it, for every patched arm of `rep`:

    - rule 2, the primary TOST-equivalent to off: the source-busy case, and on a 2-node host every case;
    - amendments 4 and 5, no harm over the case's secondaries (passes per second included): the multi-instance
      and the two-thread controls, whose primary is reported with rule 3's test;
    - amendment 7, the full-kernel knob control: rule 3's test on the primary and no harm over the main case's
      secondaries, both against the report's base (the feature off);
    - any other case (the main case on the main topology) is the main study's: ``apply_rules``, not here."""
    out = []
    for arm in [a for a in rep["arms"] if a != rep.get("base", BASE)]:
        if case == CONTROL_CASE or topology == "2node":
            out.append(Finding(2, arm, _equivalent(rep, PRIMARY, arm), _line(rep, PRIMARY, arm)))
        elif case in UNIT_CASES or case == KNOB_CASE:
            out.append(Finding(3, arm, _verdict(rep, PRIMARY, arm) == paired.BETTER, _line(rep, PRIMARY, arm)))
            ok, why = no_harm(rep, arm, SECONDARY if case == KNOB_CASE else MULTI_SECONDARY)
            out.append(Finding(4, arm, ok, f"no harm: {why}"))
        else:
            raise ValueError(f"{case!r} on {topology!r} is the main study's case: judge it with apply_rules")
    return out


def _choose(dec: Decision, main: dict, code_lines: dict[str, int]) -> Decision:
    if not dec.candidates:
        dec.statement = "No design meets rules 1-3 and does no harm: none is cleared to ship on this study."
        return dec
    if not dec.improving:
        dec.basis = "mechanism only"
        dec.statement = (
            "No design is better than upstream on outcomes in this scenario; shipping "
            + ("one of " if len(dec.candidates) > 1 else "")
            + ", ".join(dec.candidates)
            + " is a decision about the mechanism only."
        )
        return dec
    if len(dec.improving) == 1:
        dec.choice, dec.basis = dec.improving[0], "data"
        dec.statement = f"{dec.choice} is the only design that improves an outcome and does no harm."
        return dec
    wins: dict[str, int] = {a: 0 for a in dec.improving}
    for i, a in enumerate(dec.improving):
        for b in dec.improving[i + 1 :]:
            c = direct_locality(main, a, b)
            dec.direct[f"{a} vs {b}"] = paired.describe(c, "%")
            if c.verdict == paired.BETTER:
                wins[a] += 1
            elif c.verdict == paired.WORSE:
                wins[b] += 1
    top = [a for a, w in wins.items() if w == len(dec.improving) - 1]
    if len(top) == 1:
        dec.choice, dec.basis = top[0], "data"
        dec.statement = f"{dec.choice} is better on locality than every other improving design, paired."
        return dec
    sizes = {a: code_lines[a] for a in dec.improving if a in code_lines}
    smallest = [a for a in sizes if sizes[a] == min(sizes.values())] if sizes else []
    if len(smallest) != 1:
        dec.statement = (
            "No improving design separates from the others on locality, and the code sizes do not single one out "
            f"({', '.join(f'{a} {n}' for a, n in sizes.items()) or 'not known'} changed code lines): rule 5 "
            "makes no choice between " + ", ".join(dec.improving) + "."
        )
        return dec
    dec.choice, dec.basis = smallest[0], "code"
    dec.statement = (
        f"No improving design separates from the others on locality; {dec.choice} is the smallest code change "
        f"({sizes[dec.choice]} changed code lines): the choice was made on code, not data."
    )
    return dec
