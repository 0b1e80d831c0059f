"""Pure parts of the kpatch step: stage parsing, failure mapping, preflight rules, target definitions, lab
config checks and cache keys. Fast, no kernel tree or kpatch-build needed (core tier)."""

from __future__ import annotations

from pathlib import Path

import pytest

from numaforge import defaults
from numaforge.errors import NumaforgeError
from numaforge.kernel import kpatch as kp
from numaforge.kernel import labkernel, targets

DATA = Path(__file__).resolve().parents[1] / "data" / "kpatch"
FAILURES = sorted((DATA / "failures").glob("*.log"))


@pytest.mark.parametrize("log", FAILURES, ids=lambda p: p.stem)
def test_failure_logs_map_to_the_kind_named_by_the_file(log):
    err = kp.map_failure(log.read_text(), "/x/kpatch-build.log")
    assert isinstance(err, kp.KpatchBuildError) and isinstance(err, NumaforgeError)
    assert err.kind == log.stem
    assert err.log == "/x/kpatch-build.log" and "/x/kpatch-build.log" in err.where
    assert err.fix and err.what


def test_failure_corpus_covers_the_issue_list():
    kinds = {p.stem for p in FAILURES}
    assert {"gcc-mismatch", "invalid-ancestor", "read-mostly", "unsupported-section", "init-code"} <= kinds


def test_gcc_mismatch_names_both_compilers():
    err = kp.map_failure((DATA / "failures" / "gcc-mismatch.log").read_text(), "L")
    assert "12.2.0" in err.what and "10.2.1" in err.what


def test_stages_are_recognised_in_order():
    lines = [
        "Using source directory at /t",
        "Testing patch file(s)",
        "Reading special section data",
        "Building original source",
        "Building patched source",
        "Extracting new and modified ELF sections",
        "Patched objects: vmlinux",
        "Building patch module: livepatch-x.ko",
        "SUCCESS",
    ]
    got = [kp.parse_stage(ln)[0] for ln in lines]
    assert got == [s[1] for s in kp.STAGES]
    assert kp.parse_stage("  CC kernel/sched/fair.o") is None


def test_changed_functions_are_parsed_once_each():
    out = (
        "fair.o: changed function: task_numa_migrate.isra.0\n"
        "fair.o: new function: numa_stay_local\n"
        "fair.o: changed function: task_numa_migrate.isra.0\n"
        "Patched objects: vmlinux\n"
    )
    assert kp.parse_functions(out) == [
        {"object": "fair.o", "kind": "changed", "function": "task_numa_migrate.isra.0"},
        {"object": "fair.o", "kind": "new", "function": "numa_stay_local"},
    ]


GOOD_CFG = {
    "CONFIG_DEBUG_INFO": "y",
    "CONFIG_LIVEPATCH": "y",
    "CONFIG_DYNAMIC_FTRACE_WITH_REGS": "y",
    "CONFIG_KALLSYMS_ALL": "y",
    "CONFIG_MODULES": "y",
}


def test_config_preflight_accepts_a_livepatch_config():
    assert kp.preflight_config(GOOD_CFG, "c") == []


@pytest.mark.parametrize("missing", sorted(kp.REQUIRED_CONFIG))
def test_config_preflight_names_each_missing_option(missing):
    cfg = dict(GOOD_CFG)
    del cfg[missing]
    errs = kp.preflight_config(cfg, "/t/.config")
    assert len(errs) == 1 and missing in errs[0].what and missing in errs[0].fix and errs[0].where == "/t/.config"


@pytest.mark.parametrize("bad", sorted(kp.FORBIDDEN_CONFIG))
def test_config_preflight_rejects_unsupported_options(bad):
    errs = kp.preflight_config({**GOOD_CFG, bad: "y"}, "c")
    assert len(errs) == 1 and bad in errs[0].what


def test_compiler_preflight():
    k10 = "GCC: (Debian 10.2.1-6) 10.2.1 20210110"
    assert kp.preflight_compiler(k10, k10, "gcc-10", "v") == []
    errs = kp.preflight_compiler(k10, "GCC: (Debian 12.2.0-14) 12.2.0", "gcc", "/v")
    assert len(errs) == 1 and "mismatch" in errs[0].what and "compiler:" in errs[0].fix
    assert "no GCC .comment" in kp.preflight_compiler("", k10, "gcc-10", "/v")[0].what


def test_release_preflight_checks_tree_and_hosts():
    assert kp.preflight_release("5.10.0-46-amd64", "5.10.0-46-amd64", {"a": "5.10.0-46-amd64", "b": None}, "t") == []
    errs = kp.preflight_release("5.10.0-46-amd64", "5.10.262", {"h1": "5.10.0-45-amd64"}, "t")
    assert [e.where for e in errs] == ["t", "inventory host h1"]
    assert "KERNELRELEASE" in errs[0].fix


def test_disk_and_toolchain_preflight():
    assert kp.preflight_disk(10 * 2**30, 8 * 2**30, "/c") == []
    assert "GiB free" in kp.preflight_disk(2**30, 8 * 2**30, "/c")[0].what
    assert kp.preflight_toolchain("0.9.11", "k") == []
    assert "0.9.11" in kp.preflight_toolchain("0.9.9", "k")[0].what


def test_module_name_fits_and_is_stable():
    name = kp.module_name("sched-numa-prefer-local-fallback")
    assert name == "livepatch-sched-numa-prefer-local-fallback"
    long = kp.module_name("x" * 80 + "!!")
    assert len(long) <= 48 and not long.endswith("-")


def test_artifact_key_changes_with_every_input():
    base = {"patch_sha256": "a", "compiler": "gcc", "inputs": {"lab_key": "k"}, "kpatch": "0.9.11"}
    k0 = kp.artifact_key(base)
    assert kp.artifact_key(dict(base)) == k0
    for field, value in (
        ("patch_sha256", "b"),
        ("compiler", "gcc-10"),
        ("inputs", {"lab_key": "j"}),
        ("kpatch", "0.9.12"),
    ):
        assert kp.artifact_key({**base, field: value}) != k0


def test_command_line_and_release_env():
    tc = kp.Toolchain(Path("/p/bin/kpatch-build"), "0.9.11", Path("/p/libexec/kpatch"), Path("/p/share/kpatch"))
    cmd = kp.kpatch_command(tc, Path("/t"), Path("/v"), Path("/c.patch"), "livepatch-x", Path("/o"), 4, Path("/cfg"))
    assert cmd == [
        "/p/bin/kpatch-build",
        "-s",
        "/t",
        "-v",
        "/v",
        "-n",
        "livepatch-x",
        "-o",
        "/o",
        "-j",
        "4",
        "-R",
        "-c",
        "/cfg",
        "/c.patch",
    ]
    # replace only on request; kpatch-build -t for a vmlinux-only build
    cmd = kp.kpatch_command(
        tc,
        Path("/t"),
        Path("/v"),
        Path("/c.patch"),
        "x",
        Path("/o"),
        2,
        replace=True,
        build_targets=("vmlinux", "modules_prepare"),
    )
    assert "-R" not in cmd and cmd[-5:] == ["-t", "vmlinux", "-t", "modules_prepare", "/c.patch"]
    assert kp.release_makeflags("5.10.0-46-amd64") == {"MAKEFLAGS": "KERNELRELEASE=5.10.0-46-amd64"}
    assert kp.release_makeflags(None) == {}
    assert kp.make_vars(tc) == ["CC=/p/libexec/kpatch/kpatch-cc gcc", "LD=/p/libexec/kpatch/kpatch-cc ld"]
    assert kp.kcflags(tc).split() == ["-I/p/share/kpatch/patch", "-ffunction-sections", "-fdata-sections", "-gz=none"]


def test_modinfo_parse_keeps_first_value():
    info = kp.parse_modinfo(
        "filename: /x.ko\nlivepatch:      Y\nname:           livepatch_x\n"
        "vermagic:       5.10.262 SMP mod_unload \ndepends:        \n"
    )
    assert info["livepatch"] == "Y" and info["name"] == "livepatch_x" and info["vermagic"] == "5.10.262 SMP mod_unload"


# ---------------------------------------------------------------- targets


def test_shipped_targets_load():
    assert {"lab", "debian-5.10.0-46-amd64"} <= set(targets.available())
    lab = targets.load_target("lab")
    assert lab.kind == "lab" and lab.kernel_release == "5.10.262" and lab.compiler == "gcc-10"
    deb = targets.load_target("debian-5.10.0-46-amd64")
    assert deb.kernel_release == "5.10.0-46-amd64" and deb.debian["dbg_package"].endswith("-dbg")
    # non-replace unless a target says so; Debian builds vmlinux only, through ccache
    assert lab.replace is False and deb.replace is False
    assert deb.build_targets == ("patch-dirs", "modules_prepare") and deb.cc_wrapper == "ccache"


def test_patch_dirs_are_the_minimal_directories_a_patch_touches():
    patch = (
        "--- a/kernel/sched/fair.c\n+++ b/kernel/sched/fair.c\n@@ -1 +1 @@\n"
        "--- a/kernel/sysctl.c\n+++ b/kernel/sysctl.c\n--- /dev/null\n+++ b/mm/new.c\n"
    )
    assert kp.expand_build_targets(("patch-dirs", "modules_prepare"), patch) == ["kernel/", "mm/", "modules_prepare"]
    assert kp.expand_build_targets(("patch-dirs",), "+++ b/kernel/sched/fair.c\n") == ["kernel/sched/"]


@pytest.mark.parametrize(
    "extra, needle",
    [
        ({"replace": "yes"}, "replace must be true or false"),
        ({"build_targets": "vmlinux"}, "build_targets must be a list"),
        ({"cc_wrapper": "sccache"}, "unsupported cc_wrapper"),
    ],
)
def test_target_build_options_are_checked(extra, needle):
    doc = {
        "name": "t",
        "kind": "lab",
        "kernel_release": "5.10.262",
        "base_version": "5.10.262",
        "compiler": "gcc-10",
        "source": "x",
        **extra,
    }
    with pytest.raises(targets.TargetError, match=needle):
        targets.parse_target(doc, "t.yaml")
    assert targets.parse_target({**doc, **{k: None for k in extra}, "replace": True}, "t.yaml").replace is True


def test_debian_tree_key_names_every_input():
    base = ("s" * 64, "c" * 64, "gcc-10", "0.9.11", "recipe")
    k0 = kp.debian_tree_key(*base)
    assert len(k0) == 16
    for i in range(len(base)):
        assert kp.debian_tree_key(*base[:i], base[i] + "x", *base[i + 1 :]) != k0


@pytest.mark.parametrize(
    "name,needle",
    [
        ("missing-compiler", "missing key(s): compiler"),
        ("unknown-kind", "unknown kind 'rpm'"),
        ("debian-without-packages", "debian.headers_package"),
        ("bad-base-version", "bad base_version"),
        ("unknown-key", "unknown key(s): kcflags"),
        ("name-differs-from-file", "defines name 'something-else'"),
        ("broken-yaml", "invalid YAML"),
    ],
)
def test_bad_target_definitions_are_explained(name, needle):
    with pytest.raises(targets.TargetError) as ei:
        targets.load_target(name, DATA / "targets")
    assert needle in ei.value.what
    assert str(DATA / "targets" / f"{name}.yaml") in ei.value.where
    assert ei.value.fix


def test_unknown_target_lists_the_available_ones():
    with pytest.raises(targets.TargetError) as ei:
        targets.load_target("nope")
    assert "lab" in ei.value.fix


class _H:
    def __init__(self, name, target=None):
        from types import SimpleNamespace

        self.name = name
        self.kernel = SimpleNamespace(target=target, release=None)


def test_hosts_group_by_their_target_default_lab():
    hosts = [_H("a", "debian-5.10.0-46-amd64"), _H("b"), _H("c", "debian-5.10.0-46-amd64")]
    assert targets.group_hosts(hosts) == {"debian-5.10.0-46-amd64": ["a", "c"], "lab": ["b"]}
    assert targets.group_hosts(hosts, explicit="lab") == {"lab": ["a", "b", "c"]}
    assert targets.group_hosts([]) == {"lab": []}


# ---------------------------------------------------------------- lab kernel config


def test_lab_fragment_has_what_kpatch_and_the_vm_need():
    frag = labkernel.parse_fragment(labkernel.fragment_path().read_text())
    for opt in (
        "CONFIG_NUMA",
        "CONFIG_NUMA_BALANCING",
        "CONFIG_SCHED_DEBUG",
        "CONFIG_SCHEDSTATS",
        "CONFIG_LIVEPATCH",
        "CONFIG_DEBUG_INFO",
        "CONFIG_DEBUG_INFO_DWARF4",
        "CONFIG_FTRACE",
        "CONFIG_DEVTMPFS",
        "CONFIG_BLK_DEV_INITRD",
        "CONFIG_E1000",
        "CONFIG_VIRTIO_NET",
    ):
        assert frag[opt] == "y", opt
    assert kp.preflight_config(frag, "fragment") == []


def test_fragment_parse_errors_point_at_the_line():
    with pytest.raises(labkernel.LabKernelError) as ei:
        labkernel.parse_fragment("CONFIG_A=y\nCONFIG_B y\n", "frag")
    assert ei.value.where == "frag:2"


def test_config_mismatches_report_what_kconfig_dropped():
    wanted = {"CONFIG_A": "y", "CONFIG_B": "n", "CONFIG_C": '""'}
    assert labkernel.config_mismatches(wanted, {"CONFIG_A": "y", "CONFIG_C": '""'}) == []
    assert labkernel.config_mismatches(wanted, {"CONFIG_B": "y", "CONFIG_C": '""'}) == [
        "CONFIG_A=y (got unset)",
        "CONFIG_B=n (got y)",
    ]


def test_lab_key_changes_with_each_input():
    for config in labkernel.LAB_CONFIGS.values():
        args = dict(
            source_hash="sha256:a",
            fragment=b"CONFIG_X=y\n",
            patches=[("0001.patch", b"p")],
            compiler="GCC: 10",
            tc_version="0.9.11",
            kcflags="-ffunction-sections",
            make_vars=["CC=x"],
            config=config,
        )
        k0 = labkernel.lab_key(**args)
        assert labkernel.lab_key(**args) == k0
        for field, value in (
            ("source_hash", "sha256:b"),
            ("fragment", b"CONFIG_X=n\n"),
            ("patches", [("0001.patch", b"q")]),
            ("compiler", "GCC: 12"),
            ("tc_version", "0.9.12"),
            ("kcflags", "-O3"),
            ("make_vars", ["CC=y"]),
            *(("config", other) for other in labkernel.LAB_CONFIGS.values() if other != config),
        ):
            assert labkernel.lab_key(**{**args, field: value}) != k0, (config.name, field)


def test_the_lab_config_is_picked_by_name_and_a_bad_name_is_refused(monkeypatch):
    for name, config in labkernel.LAB_CONFIGS.items():
        monkeypatch.setenv(labkernel.LAB_CONFIG_ENV, name)
        assert labkernel.lab_config() is config and labkernel.fragment_path() == labkernel.lab_dir() / config.fragment
        assert labkernel.fragment_path().is_file()
    monkeypatch.delenv(labkernel.LAB_CONFIG_ENV)
    assert labkernel.lab_config().name == labkernel.DEFAULT_LAB_CONFIG
    monkeypatch.setenv(labkernel.LAB_CONFIG_ENV, "huge")
    with pytest.raises(labkernel.LabKernelError) as ei:
        labkernel.lab_config()
    e = ei.value
    assert e.exit_code == 2 and e.where == labkernel.LAB_CONFIG_ENV and "'huge'" in e.what
    assert all(name in e.fix for name in labkernel.LAB_CONFIGS)


def test_a_target_wrapper_that_is_not_installed_fails_with_the_fix(tmp_path, monkeypatch):
    """A target asking for ccache never builds without it silently (issue 24): the error names the target file,
    the key and both fixes; --cc-wrapper names itself. An installed wrapper is used as asked."""
    doc = {
        "name": "t",
        "kind": "lab",
        "kernel_release": "5.10.262",
        "base_version": "5.10.262",
        "compiler": "gcc-10",
        "source": "x",
        "cc_wrapper": "ccache",
    }
    t = targets.parse_target(doc, "kpatch/targets/t.yaml")
    t = targets.Target(**{**t.__dict__, "path": "kpatch/targets/t.yaml"})
    monkeypatch.setenv("PATH", str(tmp_path))  # no ccache on this PATH
    with pytest.raises(NumaforgeError) as exc:
        targets.resolve_wrapper(t, None)
    e = exc.value
    assert e.exit_code == 3 and "compiler wrapper ccache is not installed" in e.what
    assert e.where == "kpatch/targets/t.yaml: cc_wrapper"
    assert "apt-get install ccache" in e.fix and "remove `cc_wrapper: ccache` from kpatch/targets/t.yaml" in e.fix
    with pytest.raises(NumaforgeError, match="distcc is not installed") as exc:
        targets.resolve_wrapper(t, "distcc")
    assert exc.value.where == "--cc-wrapper" and "drop --cc-wrapper" in exc.value.fix
    fake = tmp_path / "ccache"
    fake.write_text('#!/bin/sh\nexec "$@"\n')
    fake.chmod(0o755)
    assert targets.resolve_wrapper(t, None) == "ccache"
    assert targets.resolve_wrapper(targets.Target(**{**t.__dict__, "cc_wrapper": None}), None) is None


def test_reuse_refreshes_the_provenance_of_an_unchanged_module(tmp_path: Path) -> None:
    """Same inputs key (same combined patch), new backport commit (a reworded commit message): the module is
    reused and its manifest names the new backport; a different key is not reused."""
    import json
    from types import SimpleNamespace

    ko = tmp_path / "m.ko"
    ko.write_bytes(b"\x7fELF module")
    old = {
        "module_file": "m.ko",
        "sha256": kp.sha256_file(ko),
        "inputs_key": "k1",
        "result_commit": "a" * 40,
        "base_commit": "b" * 40,
        "series_files": {"0001.patch": "old"},
    }
    (tmp_path / "manifest.json").write_text(json.dumps(old))
    logs: list[str] = []
    t = SimpleNamespace(name="lab")
    prov = {"result_commit": "c" * 40, "base_commit": "b" * 40, "series_files": {"0001.patch": "new"}}
    res = kp._reuse(tmp_path, "k1", t, 0.0, logs.append, prov)
    assert res is not None and res.status == "unchanged" and res.manifest["result_commit"] == "c" * 40
    assert json.loads((tmp_path / "manifest.json").read_text())["series_files"] == {"0001.patch": "new"}
    assert any("manifest updated" in m for m in logs) and not list(tmp_path.glob(".*tmp"))
    assert kp._reuse(tmp_path, "k2", t, 0.0, logs.append, prov) is None


def test_series_key_changes_with_the_lab_kernel_and_the_series_tree(monkeypatch, tmp_path):
    k0 = labkernel.series_key("7ea1bdd532c20285bf02", "95335340d56e06c7349e6e2f210f4b8551d6306e")
    assert labkernel.series_key("7ea1bdd532c20285bf02", "95335340d56e06c7349e6e2f210f4b8551d6306e") == k0
    assert labkernel.series_key("7ea1bdd532c20285bf03", "95335340d56e06c7349e6e2f210f4b8551d6306e") != k0
    assert labkernel.series_key("7ea1bdd532c20285bf02", "95335340d56e06c7349e6e2f210f4b8551d6306f") != k0
    # incremental builds live apart from the from-scratch ones earlier releases kept in kpatch/lab/<key>
    monkeypatch.setenv("NUMAFORGE_CACHE", str(tmp_path))
    assert labkernel.series_root(k0) == tmp_path / "kpatch" / "series" / k0


def test_the_lab_config_names_the_environment_check_knows_are_the_recipes():
    """numaforge.defaults names the recipes for the NUMAFORGE_LAB_CONFIG check (which must not import the kernel
    pipeline: tests/test_startup.py); they must be labkernel's."""
    assert tuple(labkernel.LAB_CONFIGS) == defaults.LAB_CONFIG_NAMES
    assert labkernel.DEFAULT_LAB_CONFIG == defaults.DEFAULT_LAB_CONFIG in defaults.LAB_CONFIG_NAMES
