"""Protocol amendment 8's decision rule (numaforge.measure.decision.judge_case / across_cases) and its report
(bench/numa_effect.py control on a study of the amendment's cases), issue 42.

Synthetic per-block data for every branch of the rule (passes; fails locality; fails load-balancer returns; the
primary's "better" required and missing; the primary non-inferior where off makes no not-closer move; too few
blocks), the decision over every registered case, the registered block counts against the amendment's text and
against bench/numa_effect_power.py's computation from the pilots it names, the real class pilot (2 blocks: no
verdict), and every earlier generated report regenerated unchanged (load-balancer returns stay descriptive there).
Pure: nothing here boots a VM; the report tests run the bench script on study files."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import benchscripts
import pytest

from numaforge.kernel import labkernel
from numaforge.lab import vm
from numaforge.measure import configs, decision, scenario, study
from numaforge.measure.scenario import ProbeMetrics

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = ROOT / "docs" / "numa-effect-protocol.md"
PILOTS = ROOT / "docs" / "numa-effect" / "pilot"
CLASS_PILOT = PILOTS / "probe-backplane4-classes-pilot.json"
P3S0_PILOT = PILOTS / "probe-backplane4-p3-s0-pilot.json"
TWO_NODE = ROOT / "docs" / "numa-effect" / "study" / "probe-2node.json"

N = 20
JITTER = [((b * 7) % 11 - 5) / 20 for b in range(1, 101)]  # per block, in [-0.25, +0.25]: paired, not flat
OFF = {
    "not_closer_per_min": 4.0,
    "local_share_30s": 60.0,
    "lb_returns_per_min": 0.5,
    "time_to_90": 30.0,
    "pages_migrated_per_min": 1000.0,
}
GOOD = {"not_closer_per_min": 0.5, "local_share_30s": 75.0, "time_to_90": 20.0}  # fewer moves, more local


def blocks(spec: dict[str, dict[str, float]], n: int = N, off: dict[str, float] | None = None) -> decision.Blocks:
    """{arm: {endpoint: {block: value}}}: each arm's values are off's (or `off`) overridden by its spec, plus a
    per-block jitter that off carries at 1.5x (so every paired difference varies)."""
    out: decision.Blocks = {}
    for arm, over in {"off": {}, **spec}.items():
        vals = (off or OFF) | over
        k = 1.5 if arm == "off" else 1.0
        out[arm] = {
            key: {b: v + k * JITTER[b - 1] * (0.1 if key == "lb_returns_per_min" else 1) for b in range(1, n + 1)}
            for key, v in vals.items()
        }
    return out


def test_an_arm_better_on_the_primary_and_non_inferior_on_locality_and_returns_passes():
    cv = decision.judge_case(blocks({"winner": GOOD}), N)
    av = cv.arms["winner"]
    assert (cv.blocks, cv.n, cv.primary_test) == (N, N, "better") and cv.off_median_not_closer > 0
    assert av.verdict == decision.PASS and av.failed == []
    assert set(av.endpoints) == {scenario.PRIMARY, *scenario.CASE_SECONDARY}
    loc, ret = av.endpoints["local_share_30s"], av.endpoints["lb_returns_per_min"]
    assert loc.bound > -5 and loc.margin == 5 and loc.holds and loc.required and loc.test == "non-inferior"
    assert ret.bound < 0.25 and ret.margin == 0.25 and ret.holds and ret.required
    assert av.endpoints["time_to_90"].margin == 10 and not av.endpoints["time_to_90"].required
    assert av.endpoints["pages_migrated_per_min"].margin == pytest.approx(250, rel=0.01)  # 25 % of off's mean
    # Holm over the four registered secondaries: locality's adjusted p is its raw p times the family's rank
    ps = {k: av.endpoints[k].p for k in scenario.CASE_SECONDARY}
    assert all(av.endpoints[k].p_holm >= ps[k] for k in ps) and av.endpoints[scenario.PRIMARY].p_holm is None
    assert av.endpoints["local_share_30s"].direction == "better"


@pytest.mark.parametrize(
    ("arm", "failed"),
    [
        ({**GOOD, "local_share_30s": 50.0}, "1. locality not shown non-inferior (-5 points)"),
        ({**GOOD, "lb_returns_per_min": 0.8}, "2. load-balancer returns not shown non-inferior (+0.25 /min)"),
        ({**GOOD, "not_closer_per_min": 4.0}, "3. primary not better than off"),
    ],
    ids=["locality", "returns", "primary-better-missing"],
)
def test_an_arm_that_misses_one_required_test_fails_the_case_and_says_which(arm, failed):
    cv = decision.judge_case(blocks({"winner": GOOD, "other": arm}), N)
    assert cv.arms["winner"].verdict == decision.PASS  # the same blocks judge each arm on its own
    assert cv.arms["other"].verdict == decision.FAIL and cv.arms["other"].failed == [failed]


def test_where_off_makes_no_not_closer_move_the_primary_is_non_inferior_within_one_per_minute():
    data = blocks({"same": GOOD, "adds": {**GOOD, "not_closer_per_min": 2.0}})
    for arm in ("off", "same"):  # no not-closer move in any block (a count cannot jitter below 0)
        data[arm][scenario.PRIMARY] = dict.fromkeys(range(1, N + 1), 0.0)
    cv = decision.judge_case(data, N)
    assert cv.primary_test == "non-inferior" and cv.off_median_not_closer == 0
    same = cv.arms["same"].endpoints[scenario.PRIMARY]
    assert same.test == "non-inferior" and same.margin == 1.0 and same.bound < 1.0 and same.holds
    assert cv.arms["same"].verdict == decision.PASS  # not "better" (it cannot be), and not required to be
    assert cv.arms["adds"].verdict == decision.FAIL
    assert cv.arms["adds"].failed == ["3. primary not shown non-inferior (+1 /min)"]


@pytest.mark.parametrize("registered", sorted(set(decision.REGISTERED_BLOCKS.values())))
def test_a_case_with_fewer_blocks_than_its_n_gives_no_verdict_for_any_arm(registered):
    bad = {**GOOD, "local_share_30s": 20.0, "lb_returns_per_min": 3.0}
    cv = decision.judge_case(blocks({"winner": GOOD, "bad": bad}, n=registered - 1), registered)
    assert cv.blocks == registered - 1
    for av in cv.arms.values():
        assert av.verdict == decision.NO_VERDICT and av.failed == []
        assert all(ep.holds is None for ep in av.endpoints.values())
        assert av.endpoints["local_share_30s"].estimate is not None  # the estimates are still reported
    assert decision.judge_case(blocks({"winner": GOOD, "bad": bad}, n=registered), registered).arms["bad"].verdict == (
        decision.FAIL
    )


def every_case(verdict_of) -> dict[str, decision.CaseVerdict]:
    """A verdict for every registered case (derived from REGISTERED_BLOCKS), each arm's from verdict_of(case)."""
    out = {}
    for key, n in decision.REGISTERED_BLOCKS.items():
        name = decision.case_name(*key)
        cv = decision.CaseVerdict(n, n, 1.0, "better")
        for arm, v in verdict_of(name).items():
            cv.arms[arm] = decision.ArmVerdict(arm, v, {})
        out[name] = cv
    return out


def test_one_failing_case_means_no_design_is_the_fix_and_each_arms_failing_cases_are_listed():
    names = [decision.case_name(*k) for k in decision.REGISTERED_BLOCKS]
    failing = names[2]
    acr = decision.across_cases(
        every_case(lambda c: {"winner": decision.FAIL if c == failing else decision.PASS, "alt-distfix": decision.FAIL})
    )
    assert acr.fix == [] and acr.failing == {"winner": [failing], "alt-distfix": names}
    assert "No design passes every case of amendment 8: none ships as the fix" in acr.statement
    assert decision.across_lines(acr) == [f"- winner: fails {failing}", f"- alt-distfix: fails {', '.join(names)}"]
    # the same with the failing case passed: winner is the fix
    acr = decision.across_cases(every_case(lambda c: {"winner": decision.PASS, "alt-distfix": decision.FAIL}))
    assert acr.fix == ["winner"] and acr.statement == "winner passes every case of amendment 8: it is the fix."
    # a case not yet run (or with too few blocks) leaves every arm without a verdict there: no fix yet
    cases = every_case(lambda c: {"winner": decision.PASS})
    del cases[names[-1]]
    cases[names[0]].arms["winner"].verdict = decision.NO_VERDICT
    acr = decision.across_cases(cases)
    assert acr.fix == [] and acr.pending == {"winner": [names[0], names[-1]]}
    assert acr.statement.startswith("No design is the fix yet")
    assert decision.across_lines(acr) == [f"- winner: fails no case; no verdict yet in {names[0]}, {names[-1]}"]


def _doc_section(title: str) -> str:
    text = PROTOCOL.read_text()
    start = text.index(title)
    return text[start : text.index("\n####", start + len(title))]


def test_the_registered_block_counts_are_amendment_8s_table_and_its_classes_the_slits():
    """REGISTERED_BLOCKS is the amendment's "Blocks" table, case by case, and its cases are the "Cases" table's
    classes, which are numaforge.measure.configs.scan_classes of each lab topology (the class's first pair)."""
    rows = re.findall(r"^\| (\w+) \((\d+), (\d+)\) \| (\d+) \|", _doc_section("#### Blocks"), re.M)
    assert {(t, (int(p), int(s))): int(n) for t, p, s, n in rows} == decision.REGISTERED_BLOCKS
    cases = re.findall(r"^\| (\w+)[^|]* \| ([^|]+) \| \d+ \|", _doc_section("#### Cases"), re.M)
    listed = {(t, tuple(int(x) for x in pair)) for t, cls in cases for pair in re.findall(r"\((\d+), (\d+)\)", cls)}
    assert listed == set(decision.REGISTERED_BLOCKS)
    for topo in {t for t, _ in decision.REGISTERED_BLOCKS}:
        tp = vm.topology(topo)
        reps = {c.rep for c in configs.scan_classes(tp.distances, tp.cpus)}
        assert reps == {p for t, p in decision.REGISTERED_BLOCKS if t == topo}


def _power():
    return benchscripts.load("numa_effect_power")


def test_the_registered_block_counts_are_what_the_power_script_computes_from_the_named_pilots():
    """The amendment's computation: per backplane4 class the largest count of its pilot cases (the class pilot's
    case, and the P = 3, S = 0 pilot's in the class scan_classes puts (3, 0) in); nps2 takes the backplane4 class
    of the same pair; the 2-node case the 2-node control study's source-spare case."""
    power = _power()
    need = power.case_blocks([r for p in (CLASS_PILOT, P3S0_PILOT, TWO_NODE) for r in power.pilot_rows(p)])
    tp = vm.topology("backplane4")
    rep = {m: c.rep for c in configs.scan_classes(tp.distances, tp.cpus) for m in c.members}
    got: dict[tuple[str, tuple[int, int]], int] = {}
    for (path, case), n in need.items():
        settings = study.read(PILOTS / path if (PILOTS / path).exists() else TWO_NODE)[0]
        pair = scenario.case_pair(case) or (
            (settings["params"]["pref"], settings["params"]["src"]) if case == scenario.MAIN_CASE else None
        )
        if pair is None:
            continue  # the 2-node study's source-busy control: not a case of amendment 8
        topo = settings["topology"]
        key = (topo, rep[pair] if topo == "backplane4" else pair)
        got[key] = max(got.get(key, 0), n)
    for (topo, pair), n in list(got.items()):
        if topo == "backplane4":
            got[("nps2", pair)] = n
    assert got == decision.REGISTERED_BLOCKS


def bench(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "bench" / "numa_effect.py"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_the_class_pilot_gives_no_verdict_for_every_arm_in_every_case():
    """The real class pilot (backplane4, 2 blocks of off, winner and alt-root-cause-complete per class): every
    case is registered, every case is short of its n (20 or 100), so every arm gets no verdict."""
    settings, _chunks, bl = study.read(CLASS_PILOT)
    arms = settings["arms"]
    for name, blocks_ in bl.items():
        key = decision.registered_case(settings, name)
        assert key is not None
        runs = [r.as_dict() for b in blocks_ for r in b]
        cv = decision.judge_case(decision.case_blocks(runs, arms), decision.REGISTERED_BLOCKS[key])
        assert cv.blocks == 2 and list(cv.arms) == arms[1:]
        assert {av.verdict for av in cv.arms.values()} == {decision.NO_VERDICT}


def test_the_class_pilots_report_prints_no_verdict_for_every_arm_in_every_case():
    """bench/numa_effect.py control on the real class pilot: each arm's "no verdict" line per case, returns a
    registered secondary, no design the fix, exit 0; the pilot file unchanged."""
    settings, _chunks, bl = study.read(CLASS_PILOT)
    arms = settings["arms"]
    before = CLASS_PILOT.read_bytes()
    r = bench("control", "--study", str(CLASS_PILOT.relative_to(ROOT)))
    assert r.returncode == 0, r.stderr
    assert CLASS_PILOT.read_bytes() == before
    for name in bl:
        label = decision.case_name(*decision.registered_case(settings, name))
        n = decision.REGISTERED_BLOCKS[decision.registered_case(settings, name)]
        for arm in arms[1:]:
            assert (
                f"- **{arm}: no verdict** in {label} (2 of {n} blocks: a case with fewer blocks than its n gives no "
                "verdict for any arm)" in r.stdout
            )
    assert "| load-balancer returns of the probe per minute (registered secondary, amendment 8) (/min) |" in r.stdout
    assert "(proposed secondary)" not in r.stdout
    assert "result: No design is the fix yet" in r.stdout


def write_pairs_study(
    path: Path, pairs: list[tuple[int, int]], nblocks: int, bad_returns: bool, with_off: bool = True
) -> None:
    """A study over the configuration space on backplane4 (as probe --pairs writes it): winner fixes the moves
    and, with ``bad_returns``, adds a load-balancer return per minute in every case; without ``with_off`` the
    study ran winner alone."""
    out: dict[str, list[list[ProbeMetrics]]] = {}
    for pair in pairs:
        case = scenario.pair_case(*pair)
        out[case] = []
        for b in range(1, nblocks + 1):
            j = JITTER[b - 1]
            block = []
            for arm in ("off", "winner") if with_off else ("winner",):
                on = arm == "winner"
                block.append(
                    ProbeMetrics(
                        arm,
                        b,
                        not_closer_per_min=(0.2 if on else 4.0) + j * (not on),
                        local_share_30s=(80.0 if on else 60.0) + j,
                        time_to_90=30.0 + j,
                        reached_90=True,
                        pages_migrated_per_min=1000.0 + 10 * j,
                        lb_returns_per_min=(1.5 if on and bad_returns else 0.5) + j / 10,
                        closer_per_min=1.0 if on else 0.0,
                        found_nothing_per_min=0.0,
                    )
                )
            out[case].append(block)
    arms = ["off", "winner"] if with_off else ["winner"]
    settings = {"arms": arms, "modules": {"off": None, "winner": "ab" * 32}, "seed": 13}
    settings |= {"topology": "backplane4", "control": False, "pairs": [list(p) for p in pairs]}
    study.save(path, settings | {"params": {"pref": 0, "src": 2, "seconds": 60, "mb": 64}}, out, [{"from_block": 1}])


def test_a_study_of_the_registered_cases_is_judged_by_the_rule_and_other_pairs_are_not(tmp_path):
    """100 blocks (every backplane4 case's n): with returns +1 /min winner fails every case on item 2 and the
    report says no design is the fix; a pair that is not its class's first, (1, 0), is reported with the
    earlier endpoints (returns descriptive) and no rule."""
    tp = vm.topology("backplane4")
    reps = [c.rep for c in configs.scan_classes(tp.distances, tp.cpus)]
    write_pairs_study(tmp_path / "bad.json", [*reps, (1, 0)], 100, bad_returns=True)
    r = bench("control", "--study", str(tmp_path / "bad.json"), "--md", str(tmp_path / "bad.md"))
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "bad.md").read_text()
    for pair in reps:
        label = decision.case_name("backplane4", pair)
        assert f"- **winner: fail** in {label} (2. load-balancer returns not shown non-inferior (+0.25 /min))" in text
    assert "- winner: fails " + ", ".join(decision.case_name("backplane4", p) for p in reps) in text
    assert "**Result:** No design passes every case of amendment 8: none ships as the fix" in text
    section = text[text.index("### P=1 S=0 source spare") :]
    assert "Not a case amendment 8 registers" in section.split("###")[1]
    assert "(proposed secondary)" in section.split("###")[1]
    write_pairs_study(tmp_path / "ok.json", reps, 100, bad_returns=False)
    r = bench("control", "--study", str(tmp_path / "ok.json"))
    assert r.returncode == 0, r.stderr
    for pair in reps:
        assert f"- **winner: pass** in {decision.case_name('backplane4', pair)}" in r.stdout
    # nps2 and the 2-node case are not in this study: no verdict there yet, so not the fix
    assert "no verdict yet in nps2 (0, 1), nps2 (0, 2), nps2 (2, 0), 2node (0, 1)" in r.stdout
    r = bench("result", "--study", str(tmp_path / "ok.json"))
    assert r.returncode == 2 and "amendment 8" in r.stderr and "`control --study " in r.stderr


def test_a_study_of_the_registered_cases_without_off_is_refused_with_what_to_run(tmp_path):
    write_pairs_study(tmp_path / "no-off.json", [(0, 2)], 20, bad_returns=False, with_off=False)
    r = bench("control", "--study", str(tmp_path / "no-off.json"), "--md", str(tmp_path / "no-off.md"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "no-off.json: amendment 8 measures every arm against `off`" in r.stderr and "--arms off+" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "no-off.md").exists()


GENERATED = re.compile(r"^Generated by `python bench/numa_effect\.py ((?:result|control) [^`]+)`", re.M)


def generated_docs() -> list[Path]:
    return sorted(p for p in (ROOT / "docs").rglob("*.md") if GENERATED.search(p.read_text()))


@pytest.mark.parametrize("doc", generated_docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_earlier_generated_report_regenerates_to_the_same_text(doc, tmp_path):
    """Amendment 8 changes no earlier report: each committed `result`/`control` document, regenerated from its
    study file by the command it records (its outputs redirected into tmp), is the same text, byte for byte."""
    m = GENERATED.search(doc.read_text())
    assert m is not None
    argv = shlex.split(m.group(1))
    moved = {}
    for opt in ("--md", "--png"):
        if opt in argv:
            i = argv.index(opt) + 1
            moved[argv[i]] = str(tmp_path / Path(argv[i]).name)
            argv[i] = moved[argv[i]]
    r = bench(*argv)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / doc.name).read_text()
    for orig, new in moved.items():
        text = text.replace(new, orig)
    assert text == doc.read_text()


def test_the_report_names_the_lab_kernel_the_study_is_pinned_to(tmp_path):
    """A study started since the pin (probe --study records the lab kernel's recipe and content key) says which
    kernel it measured; one from before it says nothing more than its release."""
    path = tmp_path / "pinned.json"
    write_pairs_study(path, [(0, 1)], 2, bad_returns=False)
    settings, chunks, bl = study.read(path)
    for name in labkernel.LAB_CONFIGS:
        pin = {"config": name, "key": "7ea1bdd532c20285bf02"}
        study.save(path, {**settings, study.LAB_KERNEL: pin}, bl, chunks)
        r = bench("control", "--study", str(path))
        assert r.returncode == 0, r.stderr
        assert f"lab kernel recipe {name} ({labkernel.LAB_CONFIG_ENV}), content key 7ea1bdd532c20285bf02" in r.stdout
    study.save(path, settings, bl, chunks)
    assert "lab kernel recipe" not in bench("control", "--study", str(path)).stdout
