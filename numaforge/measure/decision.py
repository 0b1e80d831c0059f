"""The probe study's decision rules (docs/numa-effect-protocol.md, "Decision rules (fixed now)"), applied in order,
and amendment 8's rule for the configuration matrix (``judge_case`` per case, ``across_cases`` over them).

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
from statistics import median

from . import metrics, paired
from .scenario import (
    CASE_OUTCOMES,
    CASE_SECONDARY,
    CONTROL_CASE,
    KNOB_CASE,
    MARGINS,
    MULTI_SECONDARY,
    NI_MARGINS,
    PRIMARY,
    SECONDARY,
    UNIT_CASES,
    case_pair,
)

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


# ------------------------------------------------------------------------------------------------ amendment 8
#
# docs/numa-effect-protocol.md, amendment 8 (issue 42's configuration matrix): one case per scan class of each
# topology, run on the class's first pair, and its registered block count n. The counts were computed once, at
# registration, by bench/numa_effect_power.py --pilot from the pilots the amendment names; they are kept here as
# registered (a later pilot must not move them) and tests/lab/test_measure_amendment8.py checks them against the
# amendment's table and against that computation.
REGISTERED_BLOCKS: dict[tuple[str, tuple[int, int]], int] = {
    ("backplane4", (0, 1)): 20,
    ("backplane4", (0, 2)): 100,
    ("backplane4", (2, 0)): 100,
    ("nps2", (0, 1)): 20,
    ("nps2", (0, 2)): 100,
    ("nps2", (2, 0)): 100,
    ("2node", (0, 1)): 100,
}
LB_RETURNS = "lb_returns_per_min"
PASS, FAIL, NO_VERDICT = "pass", "fail", "no verdict"


def case_name(topology: str, pair: tuple[int, int]) -> str:
    """How the amendment's table names a case: "backplane4 (0, 2)"."""
    return f"{topology} ({pair[0]}, {pair[1]})"


def registered_case(settings: dict, case: str) -> tuple[str, tuple[int, int]] | None:
    """(topology, pair) when `case` of a study with `settings` is a case amendment 8 registers: a study over the
    configuration space (``settings["pairs"]``, bench/numa_effect.py probe --pairs) whose source-spare case is the
    registered pair of its topology's class. None for every other case (every earlier study, a source-busy
    control, a pair that is not its class's first)."""
    pair, topology = case_pair(case), str(settings.get("topology"))
    if not settings.get("pairs") or pair is None or (topology, pair) not in REGISTERED_BLOCKS:
        return None
    return topology, pair


@dataclass
class Endpoint:
    """One endpoint of one arm in one case: the paired difference arm - off and the rule's test of it."""

    key: str
    test: str  # "better" (two-sided, 5 %) or "non-inferior" (one-sided, 5 %, within the margin)
    n: int  # paired blocks
    estimate: float | None  # mean paired difference
    bound: float | None  # the one-sided 95 % bound on the harmful side (an end of the 90 % interval)
    margin: float | None  # absolute, in the endpoint's unit
    p: float | None  # two-sided sign-flip p (paired.sign_flip_p: exact, see p_method)
    p_holm: float | None  # Holm over the four registered secondaries; None for the primary
    direction: str  # paired's verdict: better | worse | no detectable change (Holm-adjusted) | no verdict: ...
    holds: bool | None  # the test held; None: no verdict (fewer blocks than the case's n)
    required: bool  # part of the pass rule (the primary, locality, load-balancer returns)
    p_method: str = "exact"  # paired.p_method: "exact", or "monte carlo" where d lies on no grid it can count


@dataclass
class ArmVerdict:
    arm: str
    verdict: str  # PASS | FAIL | NO_VERDICT
    endpoints: dict[str, Endpoint]
    failed: list[str] = field(default_factory=list)  # the rule's items that did not hold


@dataclass
class CaseVerdict:
    blocks: int  # blocks of the case (off's)
    n: int  # its registered block count
    off_median_not_closer: float | None
    primary_test: str  # "better" or "non-inferior"
    arms: dict[str, ArmVerdict] = field(default_factory=dict)


Blocks = dict[str, dict[str, dict[int, float | None]]]  # {arm: {endpoint: {block: value}}}


def case_blocks(runs: list[dict], arms: list[str] | None = None) -> Blocks:
    """{arm: {endpoint: {block: value}}} of a report's runs (ProbeMetrics.as_dict() records), the arms in the
    order of `arms` (the study's), then any other in run order: judge_case's input."""
    keys = [k for k, *_ in CASE_OUTCOMES]
    out: Blocks = {a: {} for a in arms or [] if any(r["label"] == a for r in runs)}
    for r in runs:
        for k in keys:
            out.setdefault(r["label"], {}).setdefault(k, {})[r["round"]] = r.get(k)
    return out


def judge_case(blocks: Blocks, n: int, base: str = BASE) -> CaseVerdict:
    """Amendment 8's rule for one case, every patched arm against `off` paired over the blocks (pure).

    A patched arm passes when (1) locality is non-inferior to off (the one-sided 95 % bound of the mean
    difference above -5 points), (2) load-balancer returns are non-inferior (bound below +0.25 /min), and (3)
    where off's median not-closer moves per minute in the case is above 0, the primary is "better" (two-sided
    sign-flip test at 5 % and the 95 % interval below 0: paired.compare), elsewhere non-inferior (bound below +1
    /min). Time to 90 % and pages migrated are tested (non-inferior, +10 s and +25 % of off's mean) and reported,
    not required. Directions of the four secondaries are Holm-adjusted over the four (paired.family). The one-sided
    bounds are the ends of paired.interval's 90 % interval, as paired.tost uses them. With fewer blocks than n
    every arm gets NO_VERDICT (estimates still shown)."""
    if base not in blocks:
        raise ValueError(f"amendment 8 measures every arm against {base!r}, and the case has no {base!r} runs")
    lower = {k: lo for k, _label, _unit, lo in CASE_OUTCOMES}
    keys = [PRIMARY, *CASE_SECONDARY]
    nblocks = len(blocks[base].get(PRIMARY, {}))
    offs = [float(v) for v in blocks[base].get(PRIMARY, {}).values() if v is not None]
    off_med = median(offs) if offs else None
    primary_better = off_med is not None and off_med > 0
    out = CaseVerdict(nblocks, n, off_med, paired.BETTER if primary_better else "non-inferior")
    margins = {k: metrics.margin(k, blocks[base].get(k, {}).values(), NI_MARGINS) for k in CASE_SECONDARY}
    margins[PRIMARY] = metrics.margin(PRIMARY, [], MARGINS)
    for arm in [a for a in blocks if a != base]:
        diffs = {k: paired.differences(blocks[base].get(k, {}), blocks[arm].get(k, {})) for k in keys}
        fam = paired.family(diffs, PRIMARY, {k: lower[k] for k in keys}, {}, CASE_SECONDARY)
        eps = {}
        for k in keys:
            c, d = fam[k], diffs[k]
            bound = None
            if len(d) >= paired.MIN_BLOCKS:
                lo, hi = paired.interval(d, level=1 - 2 * paired.ALPHA)
                bound = hi if lower[k] else lo
            better_test = k == PRIMARY and primary_better
            holds = (c.verdict == paired.BETTER) if better_test else _within(bound, margins[k], bool(lower[k]))
            eps[k] = Endpoint(
                k,
                paired.BETTER if better_test else "non-inferior",
                len(d),
                c.mean_diff,
                bound,
                margins[k],
                c.p if c.p is not None else (paired.sign_flip_p(d) if d else None),
                c.p_adj,
                c.verdict,
                holds if nblocks >= n else None,
                k in (PRIMARY, LOCALITY, LB_RETURNS),
                paired.p_method(d) if d else "exact",
            )
        av = ArmVerdict(arm, NO_VERDICT, eps)
        if nblocks >= n:
            av.failed = [rule_item(eps[k]) for k in (LOCALITY, LB_RETURNS, PRIMARY) if not eps[k].holds]
            av.verdict = FAIL if av.failed else PASS
        out.arms[arm] = av
    return out


def _within(bound: float | None, margin: float | None, lower_is_better: bool) -> bool:
    """One-sided non-inferiority: the harmful-side bound below +margin (lower is better) or above -margin."""
    if bound is None or margin is None:
        return False
    return bound < margin if lower_is_better else bound > -margin


_RULE_ITEM = {
    LOCALITY: "1. locality not shown non-inferior (-5 points)",
    LB_RETURNS: "2. load-balancer returns not shown non-inferior (+0.25 /min)",
}


def rule_item(ep: Endpoint) -> str:
    """The rule's item an endpoint that did not hold fails, in words."""
    if ep.key == PRIMARY:
        return "3. primary not " + ("better than off" if ep.test == paired.BETTER else "shown non-inferior (+1 /min)")
    return _RULE_ITEM[ep.key]


@dataclass
class Across:
    """Amendment 8's decision over its cases: a design is "the fix" only if it passes every registered case."""

    fix: list[str]  # the arms that pass every registered case
    failing: dict[str, list[str]]  # arm -> the cases it fails
    pending: dict[str, list[str]]  # arm -> the cases with no verdict yet for it (too few blocks, or not run)
    statement: str


def across_cases(cases: dict[str, CaseVerdict], registered: list[str] | None = None) -> Across:
    """The decision over `cases` ({case name: judge_case's verdict}) against every registered case (`registered`,
    default every case of REGISTERED_BLOCKS by case_name): a case not among `cases` has no verdict yet for any arm.
    One arm passing every case is the fix; several: the registered protocol's rules 4-5 choose among them (not
    applied here); none: no design ships as the fix, and each arm's failing cases are listed."""
    names = registered if registered is not None else [case_name(t, p) for t, p in REGISTERED_BLOCKS]
    arms = list(dict.fromkeys(a for cv in cases.values() for a in cv.arms))
    failing: dict[str, list[str]] = {a: [] for a in arms}
    pending: dict[str, list[str]] = {a: [] for a in arms}
    for name in names:
        for a in arms:
            av = cases[name].arms.get(a) if name in cases else None
            if av is None or av.verdict == NO_VERDICT:
                pending[a].append(name)
            elif av.verdict == FAIL:
                failing[a].append(name)
    fix = [a for a in arms if not failing[a] and not pending[a]]
    if len(fix) == 1:
        statement = f"{fix[0]} passes every case of amendment 8: it is the fix."
    elif fix:
        statement = (
            f"{', '.join(fix)} pass every case of amendment 8: the registered protocol's rules 4-5 choose among "
            "them (outcomes, then a direct paired comparison on locality, then the smaller code change)."
        )
    elif arms and all(failing[a] for a in arms):
        statement = "No design passes every case of amendment 8: none ships as the fix (0000 stays in the series)."
    elif arms:
        open_ = [a for a in arms if not failing[a]]
        one = len(open_) == 1
        statement = (
            f"No design is the fix yet: {', '.join(open_)} {'fails' if one else 'fail'} no case so far, but "
            f"{'has' if one else 'have'} cases with no verdict."
        )
    else:
        statement = "No design is the fix yet: no case has a patched arm."
    return Across(fix, failing, pending, statement)


def across_lines(acr: Across) -> list[str]:
    """The README's list: per arm, the cases it fails and the cases with no verdict yet."""
    out = []
    for a in acr.failing:
        parts = [f"fails {', '.join(acr.failing[a])}" if acr.failing[a] else "fails no case"]
        if acr.pending[a]:
            parts.append(f"no verdict yet in {', '.join(acr.pending[a])}")
        out.append(f"- {a}: " + "; ".join(parts))
    return out
