"""livepatch's pure core: modinfo, preflight verdicts, sysfs/dmesg parsing, transition timing decisions."""

from pathlib import Path

import pytest

from numaforge import livepatch as lp
from numaforge.lab import vm
from numaforge.livepatch import probe as lprobe
from numaforge.livepatch.arms import FeatureSwitcher, feature_state
from numaforge.livepatch.errors import LivepatchError
from numaforge.livepatch.fleet import junit_xml
from numaforge.measure import arms as marms
from numaforge.measure import configs, scenario
from numaforge.report import HostResult, Report

ROOT = Path(__file__).resolve().parents[2]
MODINFO = b"\x7fELF junk\0name=nf_lp_x\0vermagic=5.10.262 SMP mod_unload \0livepatch=Y\0license=GPL\0srcversion=ABC\0"


def artifact(tmp_path: Path, data: bytes = MODINFO, functions=("task_numa_migrate",)) -> lp.Artifact:
    ko = tmp_path / "livepatch-x.ko"
    ko.write_bytes(data)
    return lp.load_artifact(ko, functions=list(functions))


def good_facts(**over) -> dict:
    f = lp.parse_facts(
        "uname_r=5.10.262\nlivepatch_dir=yes\nsig_enforce=N\nlockdown=[none] integrity "
        "confidentiality\nmodules_disabled=0\nkpatch=\nloaded_modules=e1000 \n"
    )
    f.update(over)
    return f


def test_modinfo_reads_the_modinfo_strings():
    info = lp.modinfo(MODINFO)
    assert info["vermagic"] == "5.10.262 SMP mod_unload " and info["name"] == "nf_lp_x" and info["livepatch"] == "Y"


def test_artifact_release_and_unsigned(tmp_path):
    a = artifact(tmp_path)
    assert a.release == "5.10.262" and a.name == "nf_lp_x" and not a.signed


def test_signed_module_is_recognised(tmp_path):
    assert artifact(tmp_path, MODINFO + b"sigdata" + lp.SIG_MARK).signed


def test_not_a_livepatch_is_refused(tmp_path):
    with pytest.raises(lp.ArtifactError, match="not a live patch"):
        artifact(tmp_path, MODINFO.replace(b"livepatch=Y\0", b""))


def test_missing_module_file_says_how_to_fix(tmp_path):
    with pytest.raises(lp.ArtifactError) as exc:
        lp.load_artifact(tmp_path / "nope.ko")
    assert "build-kpatch" in exc.value.fix


def test_manifest_sha_mismatch_is_refused(tmp_path):
    a = artifact(tmp_path)
    (tmp_path / "manifest.json").write_text('{"sha256": "00ff", "patched_functions": []}')
    with pytest.raises(lp.ArtifactError, match="differs from its manifest"):
        lp.load_artifact(a.path)


def test_manifest_supplies_functions(tmp_path):
    a = artifact(tmp_path, functions=())
    (tmp_path / "manifest.json").write_text(
        '{"sha256": "%s", "patched_functions": [{"function": "task_numa_migrate"}], "series": "no-such"}' % a.sha256
    )
    assert lp.load_artifact(a.path).functions == ["task_numa_migrate"]


def test_preflight_passes_on_a_matching_host(tmp_path):
    assert lp.preflight_problems(good_facts(), artifact(tmp_path)) == []


@pytest.mark.parametrize(
    "over, words",
    [
        ({"uname_r": "5.10.0-46-amd64"}, "vermagic mismatch"),
        ({"livepatch_dir": "no"}, "CONFIG_LIVEPATCH"),
        ({"modules_disabled": "1"}, "modules_disabled"),
        ({"sig_enforce": "Y"}, "only loads signed modules"),
        ({"lockdown": "none [integrity] confidentiality"}, "lockdown is 'integrity'"),
        ({"loaded_modules": ["nf_lp_x"]}, "already loaded"),
        ({"patched": ["other_patch/vmlinux/task_numa_migrate.isra.0,1"]}, "already replaces"),
    ],
)
def test_preflight_refuses_with_a_fix(tmp_path, over, words):
    probs = lp.preflight_problems(good_facts(**over), artifact(tmp_path))
    assert len(probs) == 1 and words in probs[0].what and probs[0].fix


def test_signature_policy_does_not_bother_signed_modules(tmp_path):
    a = artifact(tmp_path, MODINFO + lp.SIG_MARK)
    assert lp.preflight_problems(good_facts(sig_enforce="Y", lockdown="[integrity]"), a) == []


def test_parse_facts_lists_other_patches():
    f = lp.parse_facts("lp=p1 1 0\nfn=p1 vmlinux/foo,1\nfn=p1 e1000/bar,1\nloaded_modules=a b\ntainted=32768\n")
    assert f["patched"] == ["p1/vmlinux/foo,1", "p1/e1000/bar,1"] and f["loaded_modules"] == ["a", "b"]
    assert f["livepatches"]["p1"]["enabled"] == "1" and f["tainted"] == "32768"


def with_manifest(a: lp.Artifact, **fields) -> lp.Artifact:
    import json

    (a.path.parent / "manifest.json").write_text(json.dumps({"sha256": a.sha256, **fields}))
    return lp.load_artifact(a.path)


OTHER = {"cve_fix": {"enabled": "1", "transition": "0", "functions": ["vmlinux/tcp_v4_rcv,1"]}}


def test_replace_module_is_refused_while_other_live_patches_are_loaded_listing_them(tmp_path):
    a = with_manifest(artifact(tmp_path), replace=True)
    (p,) = lp.preflight_problems(good_facts(livepatches=OTHER), a)
    assert "replace-mode" in p.what and "cve_fix" in p.what and "--replace" in p.fix


def test_replace_module_passes_with_allow_replace_and_lists_what_it_supersedes(tmp_path):
    a = with_manifest(artifact(tmp_path), replace=True)
    facts = good_facts(livepatches=OTHER)
    assert lp.preflight_problems(facts, a, allow_replace=True) == [] and lp.superseded(facts, a) == ["cve_fix"]


def test_module_of_unknown_mode_is_treated_like_replace(tmp_path):
    (p,) = lp.preflight_problems(good_facts(livepatches=OTHER), artifact(tmp_path))
    assert "unknown mode" in p.what


def test_non_replace_module_loads_next_to_other_live_patches(tmp_path):
    a = with_manifest(artifact(tmp_path), replace=False, signature={"signer": "numaforge test key"})
    assert lp.preflight_problems(good_facts(livepatches=OTHER), a) == [] and a.signer == "numaforge test key"


def test_unsigned_module_on_a_signature_enforcing_host_names_key_enrollment(tmp_path):
    (p,) = lp.preflight_problems(good_facts(sig_enforce="Y"), artifact(tmp_path))
    assert "mokutil --import" in p.fix and "--sign-key" in p.fix


def test_func_name_strips_compiler_suffix_and_sympos():
    assert lp.func_name("task_numa_migrate.isra.0,1") == "task_numa_migrate"
    assert lp.parse_objects("vmlinux/a,1\nvmlinux/b.constprop.0,2\ne1000/c,1\n") == {
        "vmlinux": ["a,1", "b.constprop.0,2"],
        "e1000": ["c,1"],
    }


def test_dmesg_problems_pick_errors_not_normal_messages():
    text = (
        "[ 64.02] livepatch: enabling patch 'x'\n[ 64.12] livepatch: 'x': starting patching transition\n"
        "[ 65.0] livepatch: failed to register ftrace handler for function 'foo' (-16)\n"
        "[ 66.0] WARNING: CPU: 1 PID: 5 at kernel/livepatch/core.c:100\n"
    )
    assert [ln.split("] ", 1)[1][:20] for ln in lp.dmesg_problems(text, "x")] == [
        "livepatch: failed to",
        "WARNING: CPU: 1 PID:",
    ]


@pytest.mark.parametrize(
    "elapsed, signalled, action",
    [
        (0.0, False, "wait"),
        (14.9, False, "wait"),
        (15.0, False, "signal"),
        (20.0, True, "wait"),
        (60.0, True, "revert"),
        (61.0, False, "revert"),
    ],
)
def test_transition_timing(elapsed, signalled, action):
    assert lp.transition_action(elapsed, signalled, 15.0, 60.0) == action


def test_junit_has_one_case_per_host_with_failure_and_skip():
    rep = Report("validate")
    rep.hosts = [
        HostResult("a", "ok", "fine"),
        HostResult("b", "failed", "transition stalled\n  fix: x", data={"error": {"kind": "TransitionError"}}),
        HostResult("c", "not-run", "not run: rollout stopped"),
    ]
    import xml.etree.ElementTree as ET

    root = ET.fromstring(junit_xml(rep).split("?>", 1)[1])
    assert root.get("tests") == "3" and root.get("failures") == "1" and root.get("skipped") == "1"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["b"].find("failure").get("type") == "TransitionError"
    assert cases["b"].find("failure").get("message") == "transition stalled"
    assert cases["c"].find("skipped") is not None and cases["a"].find("failure") is None


# ------------------------------------------------------------------ the knob control's switch (amendment 7)

SCHED_FEATURES_TEXT = (
    "GENTLE_FAIR_SLEEPERS START_DEBIT NO_NEXT_BUDDY LAST_BUDDY CACHE_HOT_BUDDY WAKEUP_PREEMPTION NO_HRTICK "
    "NO_DOUBLE_TICK NONTASK_CAPACITY TTWU_QUEUE NO_SIS_AVG_CPU SIS_PROP NO_WARN_DOUBLE_CLOCK RT_PUSH_IPI "
    "NO_RT_RUNTIME_SHARE NO_LB_MIN ATTACH_AGE_LOAD WA_IDLE WA_WEIGHT WA_BIAS UTIL_EST UTIL_EST_FASTUP "
    "NUMA_PREFER_LOCAL ALT_PERIOD BASE_SLICE \n"
)


def test_feature_state_reads_on_off_and_absent():
    """The text is 5.10's sched_features file (kernel/sched/debug.c: names, NO_ for the ones off) with 0002's
    feature; a kernel without 0002 lists no such word."""
    assert feature_state(SCHED_FEATURES_TEXT, "NUMA_PREFER_LOCAL") is True
    off = SCHED_FEATURES_TEXT.replace("NUMA_PREFER_LOCAL", "NO_NUMA_PREFER_LOCAL")
    assert feature_state(off, "NUMA_PREFER_LOCAL") is False
    assert feature_state(SCHED_FEATURES_TEXT, "NEXT_BUDDY") is False
    assert feature_state(SCHED_FEATURES_TEXT.replace(" NUMA_PREFER_LOCAL", ""), "NUMA_PREFER_LOCAL") is None
    assert feature_state("NUMA_PREFER_LOCAL_X", "NUMA_PREFER_LOCAL") is None  # whole words only


def test_feature_arms_must_be_one_feature_and_plain_words():
    """Arms switch one feature, and every word goes into a root shell's echo: anything but a feature name is
    refused before a host is touched."""
    FeatureSwitcher(None, {"a": "NO_X", "b": "X"})
    for arms in ({"a": "NO_X", "b": "Y"}, {"a": "X; reboot", "b": "NO_X"}, {}):
        with pytest.raises(LivepatchError) as exc:
            FeatureSwitcher(None, arms)
        assert "one scheduler feature" in exc.value.what


def test_knob_arms_name_the_feature_0002_adds():
    """The knob control's words are the feature the series' 0002 really adds, on by default."""
    text = (ROOT / "patches/sched-numa-prefer-local-fallback/0002-sched-numa-prefer-local-sched-feat.patch").read_text()
    assert f"+SCHED_FEAT({marms.FEATURE}, true)" in text
    assert marms.KNOB_ARMS == {"knob-off": f"NO_{marms.FEATURE}", "knob-on": marms.FEATURE}
    d = marms.knob_designs()
    assert list(d) == ["knob-off", "knob-on"] and all(len(v["patches"]) == 3 for v in d.values())


def test_the_knob_control_runs_only_the_main_case_probe():
    p = scenario.ScenarioParams(pref=0, src=2, source_busy=True)
    got = lprobe.cases(p, control=True, knob=True)
    assert list(got) == [scenario.KNOB_CASE] and got[scenario.KNOB_CASE][0].source_busy is False


def test_a_study_over_pairs_runs_one_case_per_pair_and_its_control():
    """Issue 42 item 1: each (P, S) of the configuration space is a case of its own (and its source-busy
    control), with the study's other parameters."""
    t = vm.TOPOLOGIES["backplane4"]
    pairs = [c.rep for c in configs.scan_classes(t.distances, t.cpus)]
    p = scenario.ScenarioParams(pref=0, src=2, mb=32, seconds=20)
    got = lprobe.cases(p, control=True, pairs=pairs)
    assert list(got) == [scenario.pair_case(a, b, busy) for a, b in pairs for busy in (False, True)]
    for (a, b), busy in [(q, busy) for q in pairs for busy in (False, True)]:
        (q,) = got[scenario.pair_case(a, b, busy)]
        assert (q.pref, q.src, q.source_busy, q.mb, q.seconds) == (a, b, busy, 32, 20)
    alone = lprobe.cases(p, control=False, pairs=[(3, 0)])
    assert list(alone) == ["P=3 S=0 source spare"]


@pytest.mark.parametrize(
    "elapsed, last, due",
    [(0.0, None, False), (1.9, None, False), (2.0, None, True), (2.5, 2.0, False), (3.0, 2.0, True), (9.0, 8.5, False)],
)
def test_idle_cpus_are_prodded_from_2_s_into_a_transition_then_once_a_second(elapsed, last, due):
    """5.10 never wakes an idle CPU during a transition: the tinyconfig lab kernel (nothing runs on its idle
    CPUs) held every third transition until the kernel's 15 s signal (docs/kpatch.md)."""
    assert lp.prod_due(elapsed, last) is due
