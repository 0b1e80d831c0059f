"""`invoke backport`: apply a patch series onto a real 5.10 tree and compile-check it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..defaults import DEFAULT_DEBIAN, DEFAULT_SERIES
from ..display import esc
from ..lazy import lazy_module
from . import values
from .common import console, execute
from .optionsets import task

if TYPE_CHECKING:
    from ..kernel import backport as kbackport
    from ..kernel import series as kseries
    from ..kernel import source as ksource
else:  # imported by the task that uses it (numaforge.lazy)
    kbackport = lazy_module("numaforge.kernel.backport")
    kseries = lazy_module("numaforge.kernel.series")
    ksource = lazy_module("numaforge.kernel.source")


def _source(value) -> None:
    """--source: a spec numaforge.kernel.source understands; a git URL carries no password (by reference only)."""
    spec = ksource.parse_spec(str(value))
    if spec.kind == "git-url":
        values.no_credentials("--source", "use a credential helper or an SSH key for git")(spec.location)


@task(
    name="backport",
    iterable=["compiler"],
    checks={  # run before any tree is fetched or touched (numaforge.cli.values.preflight)
        "source": _source,
        "series": lambda v: kseries.resolve_dir(str(v)),
        "compiler": values.program("--compiler", "compiler"),
    },
    help={
        "source": "5.10 tree: debian:linux-source-5.10[=VERSION] (default %s), URL@REF (git URL + ref), "
        "a local git tree PATH[@REF], or a tarball path" % DEFAULT_DEBIAN,
        "series": f"series name under patches/ or a series directory (default {DEFAULT_SERIES})",
        "compiler": "compiler for the compile check (repeatable; default gcc-12 and gcc-10)",
        "no_compile_check": "apply and write the combined patch and manifest, but skip the compile check",
        "signoff": "commit as your git identity (git config user.name/user.email) and add your Signed-off-by "
        "(git am --signoff); default: a fixed numaforge committer, the patches' own trailers only",
    },
)
def backport_task(
    c,
    source=DEFAULT_DEBIAN,
    series=DEFAULT_SERIES,
    compiler=None,
    no_compile_check=False,
    signoff=False,
    json=None,
):
    """Apply a patch series with git am --3way onto a 5.10 tree; write combined.patch + manifest.json."""
    compilers = tuple(compiler or ("gcc-12", "gcc-10"))

    def body(report):
        try:
            res = kbackport.backport(
                source,
                series,
                compilers=compilers,
                compile_check=not no_compile_check,
                signoff=signoff,
                log=lambda m: console.print(f"[dim]backport:[/] {esc(m)}", soft_wrap=True),
            )
        except kbackport.ConflictError as exc:
            report.data["conflict"] = exc.detail
            raise
        report.data["manifest"] = res.manifest
        m = res.manifest
        out = lambda text: console.print(text, soft_wrap=True, highlight=False)
        out(f"backport {m['series']} onto {m['base_version']}: [green]{res.status}[/]")
        out(f"  tree      {res.tree}  (branch {m['branch']})")
        out(f"  base      {m['base_commit'][:12]}  {m['source_hash'][:23]}")
        out(f"  result    {res.result_commit[:12]}")
        out(f"  combined  {res.combined_patch}")
        for ch in res.compile:
            warn = f", {len(ch['warnings'])} warning(s)" if ch["warnings"] else ", no warnings"
            out(
                f"  compile   {ch['compiler']} {ch['version']}: {' '.join(ch['objects'])} ok{warn}"
                f"{' (cached)' if ch.get('cached') else ''}"
            )
        out(f"  manifest  {kbackport.output_dir(m['series'], m['base_version']) / 'manifest.json'}")

    execute(
        "backport",
        body,
        json,
        {
            "source": source,
            "series": series,
            "compiler": list(compilers),
            "no_compile_check": no_compile_check,
            "signoff": signoff,
        },
    )


TASKS = [backport_task]
