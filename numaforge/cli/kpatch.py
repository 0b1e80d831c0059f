"""Task: build-kpatch — turn the latest backport output into livepatch modules with the real kpatch-build,
one per target kernel (kpatch/targets/<name>.yaml). `invoke backport build-kpatch` runs both in one go."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from ..defaults import DEFAULT_SERIES
from ..display import esc
from ..errors import NumaforgeError
from ..lazy import lazy_module
from ..report import Report
from . import common, values
from .optionsets import task

if TYPE_CHECKING:
    from ..kernel import kpatch as kp
    from ..kernel import series as kseries
    from ..kernel import targets as tg
else:  # imported by the task that uses them (numaforge.lazy)
    kp = lazy_module("numaforge.kernel.kpatch")
    kseries = lazy_module("numaforge.kernel.series")
    tg = lazy_module("numaforge.kernel.targets")

HELP = {
    "target": "kpatch target name (kpatch/targets/NAME.yaml); default: each selected host's kernel.target, else 'lab'",
    "series": f"patch series whose latest backport output to build (default {DEFAULT_SERIES})",
    "jobs": "parallel make jobs for kpatch-build (default 2; raise it with --cc-wrapper for distcc/icecream)",
    "cc_wrapper": "compiler wrapper for distributed builds, e.g. distcc or icecc: the target gcc runs as "
    "'WRAPPER /usr/bin/gcc-N' (same compiler, so the prebuilt tree is still reused)",
    "preflight_only": "preflight plus kpatch-build's own checks (compiler, config, patch applies), stop before "
    "building",
    "sign_key": "PEM private key to sign the module with (scripts/sign-file; read only by sign-file, never copied)",
    "sign_cert": "X.509 certificate of --sign-key (enroll it on Secure Boot hosts: `mokutil --import`)",
    "force": "rebuild even when the artifact cache says the inputs are unchanged",
}


def _targets(c, report, target, select: values.Selection):
    """{target: [host names]} and {host: uname -r} from --target and/or the inventory."""
    selecting = bool(select.narrowed or select.inventory)
    hosts = []
    if selecting or not target:
        path = Path(common.inventory_path(c, select.inventory))
        if selecting or path.exists():
            _, hosts = common.load_selected(c, report, select)
    groups = tg.group_hosts(hosts, explicit=target)
    releases = {h.name: h.kernel.release for h in hosts if h.kernel and h.kernel.release}
    return groups, releases


_TARGET_NAME = values.name("--target", "kpatch target name")


@task(
    hosts=True,
    help=HELP,
    renamed={"check": "preflight_only"},  # validate's --check meant a check script (issue 39)
    checks={  # run before anything is read or built (numaforge.cli.values.preflight)
        "target": lambda v: _TARGET_NAME(v) or tg.load_target(str(v)),
        "series": lambda v: kseries.resolve_dir(str(v)),
        "jobs": lambda v: values.positive_int(v, "--jobs"),
        "cc_wrapper": values.program("--cc-wrapper", "compiler wrapper"),
        "sign_key": values.existing_file("--sign-key", "signing key"),
        "sign_cert": values.existing_file("--sign-cert", "signing certificate"),
    },
)
def build_kpatch(
    c,
    select,
    target=None,
    series=None,
    jobs=None,
    cc_wrapper=None,
    preflight_only=False,
    force=False,
    sign_key=None,
    sign_cert=None,
    json=None,
):
    """Build livepatch modules of the backported series for the target kernels (real kpatch-build)."""

    def body(report: Report):
        n_jobs = values.positive_int(jobs, "--jobs", 2)
        groups, releases = _targets(c, report, target, select)
        report.data["kpatch"] = {}
        for name, members in groups.items():
            options = kp.BuildOptions(
                jobs=n_jobs,
                cc_wrapper=cc_wrapper,
                host_releases={h: releases[h] for h in members if h in releases},
                check_only=preflight_only,
                force=force,
                sign_key=sign_key,
                sign_cert=sign_cert,
            )
            row = report.host(f"target:{name}")
            res = _build_target(name, members, series, options, row)
            _record_build(row, members, res)
            report.data["kpatch"][name] = res.manifest

    common.execute(
        "build-kpatch",
        body,
        json,
        {
            "target": target,
            "series": series,
            "jobs": jobs,
            "cc_wrapper": cc_wrapper,
            "preflight_only": preflight_only,
            "force": force,
            "signed": bool(sign_key),
        },
    )


def _build_target(name: str, members: list, series, options, row):
    """kpatch-build for one target, its stages shown as they pass; a failure is recorded in ``row`` and
    raised."""
    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        TimeElapsedColumn(),
        console=common.console.rich,
        transient=False,
    ) as progress:
        tid = progress.add_task(f"{name}: preflight", total=None)

        def on_stage(sid, label):
            progress.update(tid, description=esc(f"{name}: {label}"))
            progress.console.print(f"  {esc(name)}: [cyan]{esc(label)}[/]")

        def log(msg):
            progress.console.print(f"  {esc(msg)}")

        with row.step("build-kpatch") as st:
            try:
                res = kp.build_kpatch(name, series=series, options=options, log=log, on_stage=on_stage)
            except NumaforgeError as exc:
                row.status = "failed"
                row.message = exc.what
                row.data = {
                    "hosts": members,
                    "kind": getattr(exc, "kind", type(exc).__name__),
                    "log": getattr(exc, "log", None),
                }
                raise
            st.detail = {"status": res.status, "log": str(res.log) if res.log else None}
        progress.update(tid, description=f"{name}: {res.status}")
    return res


def _record_build(row, members: list, res) -> None:
    """A built (or checked, or unchanged) target's row: the module, its vermagic, mode, signer and functions."""
    row.status = "unchanged" if res.status in ("checked", "unchanged") else "changed"
    if res.module:
        funcs = ", ".join(f["function"] for f in res.manifest.get("patched_functions", [])) or "-"
        sig = (res.manifest.get("signature") or {}).get("signer")
        mode = "replace" if res.manifest.get("replace") else "non-replace"
        row.message = (
            f"{res.status}: {res.module} [{res.manifest.get('vermagic')}] {mode}, "
            f"{'signed by ' + sig if sig else 'unsigned'}; functions: {funcs}"
        )
    else:
        row.message = f"{res.status}: preflight and kpatch-build checks passed"
    row.data = {"hosts": members, "manifest": str(res.manifest_path) if res.manifest_path else None}


TASKS = [build_kpatch]
