"""Live-patch lifecycle on hosts: status, install (persist across reboots), unload.

- status: per host the loaded live patches (enabled, transition, patched functions, module refcount), the
  kernel taint (decoded), what loads at boot (kpatch's installed modules; numaforge's module dir and whether its
  systemd unit is enabled) and which patches numaforge owns.
- install: the module is loaded (validated: preflight, load, transition, verify; kept) when it is not already,
  then persisted: with kpatch on the host `kpatch install` (kpatch.service loads it at boot); else the module goes
  to /var/lib/numaforge/livepatch/<uname -r>/ (atomic upload: temp file, sha256 check, rename) and the
  numaforge-livepatch.service unit (written atomically, enabled) loads that directory at boot.
- unload: disable, wait for the transition, wait for refcount 0, rmmod (EBUSY retried), then remove the boot
  persistence. It refuses a live patch numaforge did not load or install unless force=True.

Ownership records (JSON, one per module): /var/lib/numaforge/livepatch/<release>/<module>.json for installed
modules, /run/numaforge/livepatch/<module>.json for modules left loaded by `validate --keep` (gone at reboot).
"""

from __future__ import annotations

import json
import shlex
import tempfile
import time
from pathlib import Path

from ..errors import NumaforgeError
from ..program import prog
from ..report import HostResult
from . import hostops
from .artifact import Artifact
from .errors import LivepatchError, UnloadError
from .host import LIVEPATCH_SYSFS, HostRun, Options, validate_host

STATE_DIR = "/var/lib/numaforge/livepatch"
RUN_DIR = "/run/numaforge/livepatch"
UNIT_NAME = "numaforge-livepatch.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT_NAME}"
WANTS_LINK = f"/etc/systemd/system/multi-user.target.wants/{UNIT_NAME}"

# %v is systemd's specifier for the running kernel release: only modules built for it are loaded
UNIT_TEXT = f"""[Unit]
Description=numaforge live patches for the running kernel
Documentation=file:docs/livepatch.md
ConditionPathIsDirectory={STATE_DIR}/%v
After=local-fs.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'for m in {STATE_DIR}/%v/*.ko; do [ -e "$m" ] || continue; n=$(basename "$m" .ko | tr - _); grep -q "^$n " /proc/modules || insmod "$m"; done'

[Install]
WantedBy=multi-user.target
"""


class OwnershipError(LivepatchError):
    """The live patch was not loaded or installed by numaforge."""

    exit_code = 2


STATUS_SCRIPT = (
    'echo "uname_r=$(uname -r)"\n'
    'echo "tainted=$(cat /proc/sys/kernel/tainted 2>/dev/null)"\n'
    'echo "kpatch=$(command -v kpatch 2>/dev/null)"\n'
    'echo "systemctl=$(command -v systemctl 2>/dev/null)"\n'
    f'echo "unit_enabled=$(test -e {WANTS_LINK} && echo yes || echo no)"\n'
    f'for f in {STATE_DIR}/$(uname -r)/*.json {RUN_DIR}/*.json; do [ -e "$f" ] && echo "record=$f $(cat "$f")"; '
    "done\n"
    f'for f in {STATE_DIR}/$(uname -r)/*.ko; do [ -e "$f" ] && echo "bootmod=$f"; done\n'
    'for p in /sys/kernel/livepatch/*; do [ -d "$p" ] && echo "refcnt=${p##*/} '
    '$(cat /sys/module/${p##*/}/refcnt 2>/dev/null)"; done\n'
    'command -v kpatch >/dev/null 2>&1 && kpatch list 2>/dev/null | sed "s/^/kpatch_list=/"\n'
    + hostops.LIVEPATCHES_SCRIPT
)


def parse_status(text: str) -> dict:
    """STATUS_SCRIPT output -> the per-host status (pure)."""
    out: dict = {"records": {}, "boot_modules": [], "kpatch_list": [], "refcnt": {}}
    for line in text.splitlines():
        key, sep, val = line.partition("=")
        if not sep:
            continue
        if key == "record":
            path, _, body = val.partition(" ")
            try:
                rec = json.loads(body)
            except ValueError:
                rec = {"unreadable": body[:200]}
            rec["record"] = path
            out["records"][Path(path).stem] = rec
        elif key == "bootmod":
            out["boot_modules"].append(val)
        elif key == "kpatch_list":
            out["kpatch_list"].append(val)
        elif key == "refcnt":
            name, _, n = val.partition(" ")
            out["refcnt"][name] = int(n) if n.strip().isdigit() else None
        elif key not in ("lp", "fn"):
            out[key] = val.strip()
    out["livepatches"] = hostops.parse_livepatches(text)
    for name, lp in out["livepatches"].items():
        lp["refcnt"] = out["refcnt"].get(name)
        rec = out["records"].get(name)
        lp["owner"] = "numaforge" if rec else "other"
        lp["installed"] = bool(rec and rec.get("installed"))
    out["taint"] = hostops.taint_detail(out.get("tainted") or "0")
    out["boot"] = boot_summary(out)
    return out


def boot_summary(st: dict) -> dict:
    """What loads at the next boot of this kernel release."""
    kpatch_installed = []
    section = None
    for line in st.get("kpatch_list", []):
        if line.startswith("Installed patch modules"):
            section = "installed"
        elif line.startswith("Loaded patch modules"):
            section = "loaded"
        elif section == "installed" and line.strip():
            kpatch_installed.append(line.split()[0])
    numaforge = [Path(p).stem.replace("-", "_") for p in st.get("boot_modules", [])]
    return {
        "kpatch": kpatch_installed,
        "numaforge": numaforge if st.get("unit_enabled") == "yes" else [],
        "numaforge_unit_enabled": st.get("unit_enabled") == "yes",
    }


def host_status(remote) -> dict:
    return parse_status(remote.run(STATUS_SCRIPT, sudo=True, check=False, timeout=60).stdout)


def status_host(remote, result: HostResult) -> HostResult:
    st = host_status(remote)
    result.data.update({k: st[k] for k in ("uname_r", "livepatches", "taint", "boot")})
    result.data["kpatch"] = st.get("kpatch") or None
    lps = st["livepatches"]
    result.status = "ok"
    result.message = (
        ", ".join(
            f"{n} ({'enabled' if lp['enabled'] == '1' else 'disabled'}"
            f"{', in transition' if lp['transition'] == '1' else ''}, {lp['owner']})"
            for n, lp in sorted(lps.items())
        )
        or "no live patches loaded"
    )
    return result


def _record(art: Artifact, how: str, installed: bool) -> str:
    return json.dumps(
        {
            "module": art.name,
            "file": art.path.name,
            "sha256": art.sha256,
            "vermagic": art.vermagic,
            "series": art.series,
            "signer": art.signer,
            "replace": art.replace,
            "by": "numaforge",
            "installed": installed,
            "via": how,
            "time": int(time.time()),
        },
        sort_keys=True,
    )


def _put_text(remote, text: str, path: str, mode: int = 0o644) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".tmp", delete=False) as fh:
        fh.write(text)
    try:
        return remote.put(fh.name, path, mode=mode, sudo=True)
    finally:
        Path(fh.name).unlink(missing_ok=True)


def keep_record(remote, art: Artifact) -> None:
    """validate --keep: mark the loaded module as numaforge's until the next reboot."""
    remote.run(f"mkdir -p {RUN_DIR}", sudo=True)
    _put_text(remote, _record(art, "validate --keep", False) + "\n", f"{RUN_DIR}/{art.name}.json")


def persist(remote, art: Artifact, kpatch: str | None, log=lambda m: None) -> dict:
    """Make the loaded module load at boot (atomic): kpatch install, else module dir + systemd unit."""
    rel = art.release
    d = f"{STATE_DIR}/{rel}"
    remote.run(f"mkdir -p {shlex.quote(d)} {Path(UNIT_PATH).parent}", sudo=True)
    detail: dict = {"dir": d}
    if kpatch:
        rdir = remote.run("mktemp -d /tmp/numaforge-install.XXXXXX", sudo=True).stdout.strip()
        try:
            rko = f"{rdir}/{art.path.name}"
            remote.put(art.path, rko, mode=0o600, sudo=True)
            r = remote.run(f"kpatch install {shlex.quote(rko)}", sudo=True, check=False, timeout=120)
            if r.rc != 0:
                raise LivepatchError(
                    f"kpatch install failed (rc={r.rc}): {(r.stderr or r.stdout).strip()[-300:]}",
                    f"{remote.where}: {rko}",
                    "run `kpatch install` by hand to see why",
                )
        finally:
            remote.run(f"rm -rf -- {shlex.quote(rdir)}", sudo=True, check=False)
        detail["via"] = "kpatch install"
    else:
        ko = f"{d}/{art.path.name}"
        detail["module"] = ko
        try:
            detail["sha256"] = remote.put(art.path, ko, mode=0o644, sudo=True)  # temp + sha256 check + rename
            unit_sha = _put_text(remote, UNIT_TEXT, UNIT_PATH)
            has_systemctl = remote.run("command -v systemctl", check=False).rc == 0
            if has_systemctl:
                remote.run(f"systemctl daemon-reload && systemctl enable {UNIT_NAME}", sudo=True, timeout=60)
            else:  # what `systemctl enable` does for WantedBy=multi-user.target (hosts without systemctl)
                remote.run(
                    f"mkdir -p {Path(WANTS_LINK).parent} && ln -sfn {UNIT_PATH} {WANTS_LINK}.tmp && "
                    f"mv -f {WANTS_LINK}.tmp {WANTS_LINK}",
                    sudo=True,
                )
        except NumaforgeError:
            # nothing half-installed: without the unit the module file would never load; take it back out
            remote.run(f"rm -f -- {shlex.quote(ko)}", sudo=True, check=False)
            raise
        detail.update(
            via=f"{UNIT_NAME} ({'systemctl enable' if has_systemctl else 'wants symlink'})", unit_sha256=unit_sha
        )
    _put_text(remote, _record(art, detail["via"], True) + "\n", f"{d}/{art.name}.json")
    remote.run(f"rm -f {RUN_DIR}/{art.name}.json", sudo=True, check=False)
    log(f"{art.name}: installed ({detail['via']})")
    return detail


def install_host(remote, art: Artifact, opts: Options, result: HostResult, log=lambda m: None) -> HostResult:
    """Load (validated, kept) unless it is already loaded with the same content, then persist."""
    st = host_status(remote)
    mine = st["records"].get(art.name) or {}
    loaded = art.name in st["livepatches"]
    if loaded and mine.get("sha256") != art.sha256:
        result.status = "failed"
        result.message = (
            f"{art.name} is loaded but is not this module (sha256 {str(mine.get('sha256'))[:12]} vs "
            f"{art.sha256[:12]})\n  fix: unload it first (`{prog()} livepatch-unload`)"
        )
        return result
    if not loaded:
        validate_host(remote, art, Options(**{**opts.__dict__, "keep": True, "install": False}), result, log)
        if result.status == "failed":
            return result
    else:
        result.data["already_loaded"] = True
    try:
        with result.step("install") as s:
            s.detail = persist(remote, art, st.get("kpatch") or None, log)
    except NumaforgeError as exc:
        result.status = "failed"
        result.message = exc.render()
        result.data["error"] = {"kind": type(exc).__name__, "what": exc.what, "where": exc.where, "fix": exc.fix}
        if not loaded:  # we loaded it for the install: take it back out (rolled back, not half-installed)
            h = HostRun(remote, art, opts, result, log)
            h.kpatch = st.get("kpatch") or None
            with result.step("rollback") as rs:
                rs.detail = h.disable_and_unload()
            result.data["final"] = "rolled-back"
        return result
    result.data["final"] = "installed"
    result.status = "changed"
    result.message = f"{art.name} loaded and installed ({s.detail['via']})"
    return result


def unload_host(
    remote, module: str, result: HostResult, force: bool = False, opts: Options | None = None, log=lambda m: None
) -> HostResult:
    """Disable, wait, refcount 0, rmmod; then remove what loads it at boot. Refuses foreign patches."""
    name = module.replace("-", "_")
    st = host_status(remote)
    rec = st["records"].get(name)
    lp = st["livepatches"].get(name)
    result.data.update({"module": name, "owner": "numaforge" if rec else "other", "record": rec})
    if lp is None and not rec:
        result.status = "ok"
        result.message = f"{name} is not loaded and not installed: nothing to do"
        return result
    if not rec and not force:
        result.status = "failed"
        err = OwnershipError(
            f"live patch {name} was not loaded or installed by numaforge",
            f"{remote.where}: {LIVEPATCH_SYSFS}/{name}",
            "leave it to whoever installed it (kpatch unload / their tooling), or pass --force",
        )
        result.message = err.render()
        result.data["error"] = {"kind": type(err).__name__, "what": err.what, "where": err.where, "fix": err.fix}
        return result
    art = Artifact(Path(f"{name}.ko"), name, "", "", False)
    h = HostRun(remote, art, opts or Options(), result, log)
    h.kpatch = st.get("kpatch") or None
    h.taint_before = st.get("tainted") or "0"
    h.others = {n: v for n, v in st["livepatches"].items() if n != name}
    try:
        if lp is not None:
            with result.step("unload") as s:
                s.detail = h.disable_and_unload()
                s.detail["other_livepatches"] = h.check_others()
                s.detail["taint"] = h.check_taint("after the unload")
        with result.step("uninstall") as s:
            s.detail = unpersist(remote, name, rec, st)
    except LivepatchError as exc:
        result.status = "failed"
        result.message = exc.render()
        result.data["error"] = {"kind": type(exc).__name__, "what": exc.what, "where": exc.where, "fix": exc.fix}
        return result
    result.status = "changed"
    result.data["final"] = "unloaded"
    result.message = f"{name} unloaded" + (" and uninstalled" if rec and rec.get("installed") else "")
    return result


def unpersist(remote, name: str, rec: dict | None, st: dict) -> dict:
    detail: dict = {}
    rel = st.get("uname_r", "")
    if rec and rec.get("installed"):
        if str(rec.get("via", "")).startswith("kpatch"):
            r = remote.run(f"kpatch uninstall {shlex.quote(name)}", sudo=True, check=False, timeout=60)
            detail["kpatch_uninstall_rc"] = r.rc
            if r.rc != 0:
                raise UnloadError(
                    f"kpatch uninstall {name} failed: {(r.stderr or r.stdout).strip()[-200:]}",
                    remote.where,
                    "run `kpatch uninstall` by hand",
                )
        else:
            ko = f"{STATE_DIR}/{rel}/{rec.get('file') or name + '.ko'}"
            remote.run(f"rm -f -- {shlex.quote(ko)}", sudo=True)
            detail["removed"] = ko
    remote.run(f"rm -f -- {STATE_DIR}/{shlex.quote(rel)}/{name}.json {RUN_DIR}/{name}.json", sudo=True, check=False)
    left = remote.run(f"ls {STATE_DIR}/*/*.ko 2>/dev/null | wc -l", sudo=True, check=False).stdout.strip()
    if left == "0":  # nothing numaforge installed is left: the unit goes too
        has_systemctl = remote.run("command -v systemctl", check=False).rc == 0
        if has_systemctl:
            remote.run(f"systemctl disable {UNIT_NAME}", sudo=True, check=False, timeout=60)
        remote.run(f"rm -f {WANTS_LINK} {UNIT_PATH}", sudo=True, check=False)
        detail["unit_removed"] = True
    return detail
