"""Benchmark: per-host SSH work on 8 hosts vs 1 host (wall-time ratio; issue 8 target <= 1.5x).

    sudo .venv/bin/python bench/ssh_fleet.py [--hosts 8] [--forks 8] [--rounds 3] [--work facts,validate,wait]
                                             [--upload exec,sftp] [--upload-mib 16]
                                             [--login deploy|root] [--json out.json]

Each "host" is a real OpenSSH sshd in its own network namespace (tests/sshd_fixture.py NetnsLab: a bridge in the
root namespace, 10.231.X.0/24, nothing else reachable), with its own host key checked strictly. The per-host
work, under numaforge.fleet.run_fleet like every fleet task:

* ``facts``: exactly what `invoke facts` does per host (numaforge.facts.run.run_host): one SSH connection, the
  12 read-only capture commands (lspci -vvv, numactl, lscpu, sysfs reads...), parsing.
* ``validate``: validate-like: one connection, an atomic sha256-checked upload of a 1 MiB module-sized file,
  four short reads (uname -r, /proc/cmdline, tainted, /sys/kernel/livepatch), removal of the upload.
* ``upload``: one connection and one atomic sha256-checked upload of ``--upload-mib`` MiB (default 16), then its
  removal: the upload's own cost; the numaforge process's CPU seconds per MiB uploaded are printed for it.
``--upload`` picks numaforge.remote.ssh put()'s method for validate and upload (exec: cat on an exec channel, the
default; sftp: paramiko SFTP); with several (``--upload exec,sftp``) each gets its own row, ``validate[exec]``,
``validate[sftp]``..., and every round runs them in turn (order rotated per round) so load hits them alike.
* ``wait``: one connection and three 1-second waits on the host (like validate polling a live-patch transition):
  almost no CPU anywhere, so it shows the fleet runner's own overhead, apart from CPU contention.
The hosts are logged into as a fleet would be (``--login deploy``, the default): a dedicated account with
/bin/sh, no startup files and NOPASSWD sudo (``ssh.sudo: true``, so `lspci -vvv` runs as root). ``--login root``
logs in as this machine's root instead, whose ~/.bashrc (the build server's, shared by every namespace) runs
`pyenv init` twice per SSH session: ~0.15 CPU s per command, which then dominates every number.
Besides the ratio it prints the machine floor: max(1-host time, the numaforge process's CPU seconds (its Python
runs on one core at a time), CPU seconds of the whole N-host run / cores), the least wall time this machine
allows whatever the tool does, and how far the N-host run is above it.
Rounds alternate 1-host and N-host runs so machine load hits both alike; the ratio is of the medians.
Each run also reports CPU seconds: of this process (numaforge: paramiko, the fleet threads) and of the hosts'
sshd + the commands they ran, to tell "the tool serialises" from "the machine has too few cores".
The namespaces share this machine's CPUs: on a 2-core build server the N hosts' commands compete for 2 cores,
which a real fleet (one machine per host) would not. Needs root (network namespaces).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--forks", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default="facts,validate,wait", help="comma list of: facts, validate, upload, wait")
    ap.add_argument("--upload", default="exec", help="comma list of put() methods for validate/upload: exec, sftp")
    ap.add_argument("--upload-mib", type=int, default=16, help="size of the upload work's file (MiB)")
    ap.add_argument("--login", choices=("deploy", "root"), default="deploy",
                    help="deploy: a fresh /bin/sh account with NOPASSWD sudo (default); root: this machine's root")
    ap.add_argument("--json", help="write the measurements here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root: the hosts live in network namespaces (ip netns)")

    from sshd_fixture import LocalUsers, NetnsLab

    from numaforge.facts.run import Options, run_host
    from numaforge.fleet import Rollout, run_fleet
    from numaforge.remote.ssh import UPLOAD_METHODS

    base = Path(tempfile.mkdtemp(prefix="numaforge-bench-ssh-"))
    lab = NetnsLab(base)
    users = LocalUsers()
    results = {"hosts": args.hosts, "forks": args.forks, "login": args.login, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
               "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(), "work": {}}
    payload = base / "livepatch-like.ko"
    payload.write_bytes(os.urandom(1024 * 1024))
    big = base / "upload.bin"
    big.write_bytes(os.urandom(args.upload_mib * 1024 * 1024))
    kinds = [w.strip() for w in args.work.split(",") if w.strip()]
    methods = [m.strip() for m in args.upload.split(",") if m.strip()]
    if not methods or set(methods) - set(UPLOAD_METHODS):
        raise SystemExit(f"--upload: use a comma list of {', '.join(UPLOAD_METHODS)}")
    per_host = {"facts": lambda m: lambda h: run_host(h, Options()),
                "validate": lambda m: lambda h: validate_like(h, payload, m),
                "upload": lambda m: lambda h: upload_like(h, big, m),
                "wait": lambda m: wait_like}
    unknown = set(kinds) - set(per_host)
    if unknown:
        raise SystemExit(f"--work: unknown {sorted(unknown)}; use {', '.join(per_host)}")
    results["upload_mib"] = args.upload_mib
    cpu: dict = {}
    try:
        sshds = [lab.add_host(f"s{i}") for i in range(args.hosts)]
        if args.login == "root":
            inv = [h.inventory_host() for h in sshds]
        else:
            keys = base / "deploy.pub"
            keys.write_text("".join(Path(f"{h.client_key}.pub").read_text() for h in sshds))
            user = users.make(sudo="nopasswd", pubkey=keys)
            inv = [h.inventory_host(user=user, sudo=True) for h in sshds]

        def run(fn, hosts) -> float:
            s0, c0 = server_cpu(lab), time.process_time()
            t0 = time.monotonic()
            out = run_fleet(hosts, fn, rollout=Rollout(forks=args.forks), progress=False)
            dt = time.monotonic() - t0        # measured before waiting for sshd to reap its sessions
            cpu["client"], cpu["server"] = time.process_time() - c0, server_cpu(lab) - s0
            bad = [f"{r.host}: {r.message}" for r in out.results if r.status == "failed"]
            if bad:
                raise SystemExit("per-host work failed on: " + "; ".join(bad))
            return dt

        for work in kinds:
            # the rows of this work: one per upload method for the uploading works
            rows = {f"{work}[{m}]" if work in ("validate", "upload") and len(methods) > 1 else work:
                    per_host[work](m) for m in (methods if work in ("validate", "upload") else methods[:1])}
            for name, fn in rows.items():
                results["work"][name] = {"one": [], "many": [], "cpu_one": [], "cpu_many": []}
                run(fn, inv[:1])          # warm-up: imports, first connection (not measured)
            names = list(rows)
            for rnd in range(args.rounds):
                order = ["one", "many"] if rnd % 2 == 0 else ["many", "one"]
                for name in names[rnd % len(names):] + names[:rnd % len(names)]:
                    rec = results["work"][name]
                    for kind in order:
                        dt = run(rows[name], inv[:1] if kind == "one" else inv)
                        rec[kind].append(round(dt, 3))
                        rec[f"cpu_{kind}"].append({k: round(v, 3) for k, v in cpu.items()})
                        print(f"  {name} round {rnd}: {args.hosts if kind == 'many' else 1} host(s) {dt:6.2f} s  "
                              f"CPU s: numaforge process {cpu['client']:.3f}, sshd+commands {cpu['server']:.2f}",
                              flush=True)
            for name in names:
                rec = results["work"][name]
                one, many = statistics.median(rec["one"]), statistics.median(rec["many"])
                rec["ratio"] = round(many / one, 2)
                # the least wall time this machine allows for N hosts: all their CPU spread over its cores, and
                # never less than one host alone (a real fleet has each host's CPU on that host)
                # (the numaforge process counts once more on its own: its Python runs on one core at a time)
                cpu_many = statistics.median(c["client"] + c["server"] for c in rec["cpu_many"])
                client_many = statistics.median(c["client"] for c in rec["cpu_many"])
                rec["floor"] = round(max(one, client_many, cpu_many / (os.cpu_count() or 1)), 3)
                rec["over_floor"] = round(many / rec["floor"], 2)
                # numaforge's own CPU per host: what a bigger fleet costs the machine running numaforge
                rec["client_cpu_ms_per_host_one"] = round(
                    1000 * statistics.median(c["client"] for c in rec["cpu_one"]), 1)
                rec["client_cpu_ms_per_host_many"] = round(1000 * client_many / args.hosts, 1)
                if work == "upload":   # per MiB uploaded (it includes one connect and one rm per host)
                    for k in ("one", "many"):
                        rec[f"client_cpu_ms_per_mib_{k}"] = round(
                            rec[f"client_cpu_ms_per_host_{k}"] / args.upload_mib, 2)
    finally:
        lab.close()
        users.close()
        shutil.rmtree(base, ignore_errors=True)     # the payloads (16 MiB by default) and the hosts' dirs
    results["loadavg_end"] = os.getloadavg()
    for work, rec in results["work"].items():
        print(f"{work} over SSH: 1 host median {statistics.median(rec['one']):.2f} s, {args.hosts} hosts "
              f"(forks {args.forks}) median {statistics.median(rec['many']):.2f} s -> {args.hosts}/1 = "
              f"{rec['ratio']:.2f}x (target <= 1.5x); machine floor for {args.hosts} hosts "
              f"{rec['floor']:.2f} s (their CPU / {os.cpu_count()} cores) -> {rec['over_floor']:.2f}x of it")
        print(f"  {work}: numaforge process CPU per host: {rec['client_cpu_ms_per_host_one']:.1f} ms (1 host), "
              f"{rec['client_cpu_ms_per_host_many']:.1f} ms ({args.hosts} hosts)"
              + (f"; per MiB uploaded: {rec['client_cpu_ms_per_mib_one']:.2f} ms (1 host), "
                 f"{rec['client_cpu_ms_per_mib_many']:.2f} ms ({args.hosts} hosts), {args.upload_mib} MiB per host"
                 if "client_cpu_ms_per_mib_one" in rec else ""))
    print(f"logged in as: {args.login}")
    print(f"load average start {results['loadavg_start']}, end {results['loadavg_end']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
        print(f"wrote {args.json}")
    return 0


def server_cpu(lab) -> float:
    """CPU seconds used so far by every host's sshd listener and the sessions/commands it reaped (/proc stat:
    utime + stime + cutime + cstime)."""
    from sshd_fixture import descendants

    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    deadline = time.monotonic() + 5      # a session's CPU is added to the listener's when it is reaped
    while any(h.proc is not None and descendants(h.proc.pid) for h in lab.hosts) and time.monotonic() < deadline:
        time.sleep(0.05)
    for h in lab.hosts:
        if h.proc is None:
            continue
        try:
            fields = Path(f"/proc/{h.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15])
    return total / tick


def wait_like(host):
    from numaforge.remote.ssh import connect
    from numaforge.report import HostResult

    res = HostResult(host.name)
    with connect(host.ssh, host.name, connect_timeout=30) as remote:
        for _ in range(3):
            remote.run("sleep 1", timeout=60)
    return res


def validate_like(host, payload: Path, method: str):
    """One connection: upload (atomic, sha256-checked), four short reads, remove the upload."""
    from numaforge.remote.ssh import connect
    from numaforge.report import HostResult

    res = HostResult(host.name)
    with res.step("connect"):
        remote = connect(host.ssh, host.name, connect_timeout=30)
    with remote:
        dest = f"/tmp/numaforge-bench-{host.name}.ko"
        with res.step("upload"):
            remote.put(payload, dest, method=method)
        with res.step("checks"):
            for cmd in ("uname -r", "cat /proc/cmdline", "cat /proc/sys/kernel/tainted",
                        "ls /sys/kernel/livepatch 2>/dev/null || true"):
                remote.run(cmd, timeout=60)
            remote.run(f"rm -f {dest}", timeout=60)
    return res


def upload_like(host, payload: Path, method: str):
    """One connection: one big upload (atomic, sha256-checked), then its removal."""
    from numaforge.remote.ssh import connect
    from numaforge.report import HostResult

    res = HostResult(host.name)
    with connect(host.ssh, host.name, connect_timeout=30) as remote:
        dest = f"/tmp/numaforge-bench-{host.name}.bin"
        remote.put(payload, dest, method=method, timeout=600)
        remote.run(f"rm -f {dest}", timeout=60)
    return res


if __name__ == "__main__":
    sys.exit(main())
