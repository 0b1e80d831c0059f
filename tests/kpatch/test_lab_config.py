"""The tinyconfig lab config (issue 43; NUMAFORGE_LAB_CONFIG=tiny): tinyconfig plus kpatch/lab/tiny.fragment, in
which every option carries a one-line reason. The options whose reason is "needed by kpatch-build" or "needed by
tests" are the ones checked in the built kernel, whichever recipe built it (`doctor --strict`, the kpatch-tier test
below): that list is derived from the fragment, never kept by hand. The pure tests read the shipped fragment; the
last one reads the cached lab kernel setup builds (the selected recipe's)."""

from __future__ import annotations

import re

import pytest

from numaforge import doctor
from numaforge.kernel import kpatch_steps as kp
from numaforge.kernel import labkernel

FRAG = labkernel.annotated_path()
TINY = labkernel.LAB_CONFIGS["tiny"]


def options():
    return labkernel.annotated_fragment(FRAG.read_text(), "frag")


def test_every_option_of_the_fragment_has_its_reason():
    opts = options()
    assert [o.name for o in opts] == list(labkernel.parse_fragment(FRAG.read_text()))
    for o in opts:
        assert o.who in labkernel.REASONS and len(o.why) > 10, o
    assert TINY.annotated and TINY.base[-1] == "tinyconfig" and labkernel.lab_dir() / TINY.fragment == FRAG


def test_kpatch_builds_own_requirements_are_relied_on_and_its_refusals_are_off():
    """kpatch's preflight list (REQUIRED_CONFIG) is a subset of what the fragment marks "needed by kpatch-build"."""
    by_name = {o.name: o for o in options()}
    for name in kp.REQUIRED_CONFIG:
        assert by_name[name].who == "needed by kpatch-build" and by_name[name].value == "y", name
    relied = labkernel.relied_on(options())
    assert kp.preflight_config(relied, "fragment") == []
    assert all(relied.get(name, "n") != "y" for name in kp.FORBIDDEN_CONFIG)


def test_an_option_without_its_reason_line_is_refused_at_its_line():
    lines = FRAG.read_text().splitlines()
    for o in options():
        no = int(o.where.rsplit(":", 1)[1])
        broken = lines[: no - 2] + lines[no - 1 :]  # the reason line above the option dropped
        with pytest.raises(labkernel.LabKernelError) as ei:
            labkernel.annotated_fragment("\n".join(broken), "frag")
        assert ei.value.where == f"frag:{no - 1}" and o.name in ei.value.what, o
        assert "needed by kpatch-build" in ei.value.fix
    with pytest.raises(labkernel.LabKernelError) as ei:
        labkernel.annotated_fragment("# needed by tests: procfs\nCONFIG_PROC_FS=y\n# needed by nobody: x\nCONFIG_A=y\n")
    assert ei.value.where == "config.fragment:4"


def test_the_key_names_the_options_not_their_reasons():
    """A reworded reason keeps the cached kernel (the key hashes the option lines); any option change rebuilds."""
    text = FRAG.read_text()
    args = dict(
        source_hash="sha256:a",
        patches=[],
        compiler="GCC: 10",
        tc_version="0.9.11",
        kcflags="-ffunction-sections",
        make_vars=["CC=x"],
        config=TINY,
    )
    k0 = labkernel.lab_key(fragment=text.encode(), **args)
    reworded = re.sub(r"^(# needed by [^:]+: )", r"\1(reworded) ", text, flags=re.M)
    assert reworded != text and labkernel.lab_key(fragment=reworded.encode(), **args) == k0
    for o in options():
        line = next(ln for ln in text.splitlines() if re.fullmatch(rf"{o.name}=.*|# {o.name} is not set", ln))
        assert labkernel.lab_key(fragment=text.replace(line + "\n", "").encode(), **args) != k0, o.name


def test_a_built_config_missing_a_relied_on_option_is_named(tmp_path):
    relied = labkernel.relied_on(options())
    cfg = tmp_path / "config"

    def write(values):
        cfg.write_text("".join(f"{k}={v}\n" if v != "n" else f"# {k} is not set\n" for k, v in values.items()))

    write(relied)
    assert labkernel.built_config_problems(cfg) == [] and doctor.lab_config_check(cfg).ok
    for name, value in relied.items():
        if value == "y":  # dropped
            write({k: v for k, v in relied.items() if k != name})
        else:  # a "not set" one set, a string or number one unset
            write({**relied, name: "y" if value == "n" else "n"})
        problems = labkernel.built_config_problems(cfg)
        assert len(problems) == 1 and problems[0].startswith(f"{name}={value} "), problems
        row = doctor.lab_config_check(cfg)
        assert not row.ok and name in row.detail and str(cfg) in row.detail and "rebuild the lab kernel" in row.fix


@pytest.mark.kpatch
def test_the_built_lab_kernel_has_what_kpatch_build_and_the_tests_rely_on():
    lk = labkernel.find_lab_kernel()
    assert lk is not None, "the lab kernel is not built: bash scripts/setup.d/35-kernel-caches.sh"
    assert labkernel.built_config_problems(lk.config) == []
    final = labkernel.parse_fragment(lk.config.read_text())
    assert kp.preflight_config(final, str(lk.config)) == []
    row = doctor.lab_config_check(lk.config)
    assert row.ok and f"{len(labkernel.relied_on(options()))} options" in row.detail
