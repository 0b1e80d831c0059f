"""Benchmark (issue 43 item 5): a `bios-apply --reboot` rollout is bounded by POST time, not by --forks.

    .venv/bin/python bench/bios_reboot_waves.py [--hosts 1000] [--post 60] [--batch 250] [--sim-procs 2]
                                                [--ansible-hosts 200] [--ansible-serial 25%] [--json out.json]
    .venv/bin/python bench/bios_reboot_waves.py --quick      # smoke test: 40 hosts, 10 s POST, batch 10

1. N simulated BMCs (bench/bmc_farm.py, TLS on 127.0.0.1, in ``--sim-procs`` helper processes) whose reset is a
   warm restart followed by ``--post`` seconds of POST (PowerState On, BootProgress before OSRunning: what a real
   EPYC GPU server shows for 5-10 min). `invoke bios-apply --reboot --all --batch B` (numaforge's default --forks)
   writes the profile's values, resets every host once and waits for it to come back with them. The ideal is
   (waves) x (POST): every host of a wave in POST at once. Reported: wall time, the ratio to the ideal, resets per
   BMC (each exactly one GracefulRestart), values still pending (none).
2. Beside Ansible on ``--ansible-hosts`` fresh BMCs, both with the same batches (Ansible's ``serial``, numaforge's
   --batch, ``--ansible-serial``): the playbook an Ansible user writes -- community.general.redfish_config
   SetBiosAttributes, redfish_command PowerGracefulRestart, then an ``uri`` wait loop (until BootProgress says
   OSRunning with a new LastStateTime; ``delay`` 5 s as numaforge's poll) -- with ``forks`` = the batch size (so a
   whole batch runs at once: Ansible's best case; its default 5 would be far slower). numaforge keeps its default
   forks. Both timed as the user runs them (process start included); the 1-minute load average after each run.

Nothing here asserts the targets (1000 hosts within 1.25 x waves x POST; numaforge ahead of Ansible on 200).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bios_fleet import (
    PW_VAR,
    RECAP,
    VENV_BIN,
    desired_attributes,
    write_ansible_inventory,
    write_numaforge_inventory,
)
from bmc_farm import ROOT, Farm

TIMEOUT = 3600

PLAYBOOK = """\
- name: BIOS attributes, a graceful restart and a wait for POST to end (as an Ansible user writes it)
  hosts: all
  gather_facts: false
  serial: "{{{{ batch }}}}"
  vars:
    system: "https://{{{{ baseuri }}}}/redfish/v1/Systems/1"
    pw: "{{{{ lookup('ansible.builtin.env', '{pw}') }}}}"
  tasks:
    - name: SetBiosAttributes
      community.general.redfish_config:
        category: Systems
        command: SetBiosAttributes
        bios_attributes: "{{{{ bios_attrs }}}}"
        baseuri: "{{{{ baseuri }}}}"
        username: admin
        password: "{{{{ pw }}}}"
        validate_certs: true
        ca_path: "{{{{ bmc_ca }}}}"
        timeout: 60
    - name: Boot progress before the restart
      ansible.builtin.uri:
        url: "{{{{ system }}}}"
        url_username: admin
        url_password: "{{{{ pw }}}}"
        force_basic_auth: true
        ca_path: "{{{{ bmc_ca }}}}"
      register: before
    - name: PowerGracefulRestart
      community.general.redfish_command:
        category: Systems
        command: PowerGracefulRestart
        baseuri: "{{{{ baseuri }}}}"
        username: admin
        password: "{{{{ pw }}}}"
        validate_certs: true
        ca_path: "{{{{ bmc_ca }}}}"
        timeout: 60
    - name: Wait until the OS runs again
      ansible.builtin.uri:
        url: "{{{{ system }}}}"
        url_username: admin
        url_password: "{{{{ pw }}}}"
        force_basic_auth: true
        ca_path: "{{{{ bmc_ca }}}}"
      register: now
      until: >-
        now.json.BootProgress.LastState == 'OSRunning' and
        now.json.BootProgress.LastStateTime != before.json.BootProgress.LastStateTime
      retries: {retries}
      delay: 5
"""


def timed(argv: list[str], env: dict, cwd: Path, log: Path) -> tuple[float, int]:
    t0 = time.monotonic()
    with open(log, "w") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        r = subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=TIMEOUT)
    return time.monotonic() - t0, r.returncode


def numaforge_reboot(work: Path, tag: str, inv: Path, batch: str, post: float, env: dict) -> dict:
    report = work / f"numaforge-{tag}.json"
    argv = [
        sys.executable,
        "-m",
        "invoke",
        "bios-apply",
        "-i",
        str(inv),
        "--all",
        "--reboot",
        "--unverified",  # the simulator's registries carry values no public source shows (issue 39 item 5)
        "allow",
        "--batch",
        batch,
        "--power-timeout",
        str(int(post * 3 + 60)),
        "--json",
        str(report),
    ]
    dt, rc = timed(argv, env, ROOT, work / f"numaforge-{tag}.log")
    doc = json.loads(report.read_text()) if report.exists() else {"hosts": []}
    statuses: dict[str, int] = {}
    for h in doc["hosts"]:
        statuses[h["status"]] = statuses.get(h["status"], 0) + 1
    return {"seconds": round(dt, 1), "rc": rc, "statuses": statuses, "command": " ".join(argv[2:])}


def ansible_reboot(work: Path, tag: str, inv: Path, play: Path, attrs: dict, batch: int, env: dict) -> dict:
    varsfile = work / "vars.json"
    varsfile.write_text(json.dumps({"bios_attrs": attrs, "batch": batch}))
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(inv), str(play), "-f", str(batch), "-e", f"@{varsfile}"]
    dt, rc = timed(argv, env, work, work / f"ansible-{tag}.log")
    text = (work / f"ansible-{tag}.log").read_text()
    statuses = {"changed": 0, "ok": 0, "failed": 0, "unreachable": 0}
    for _host, _ok, changed, unreach, failed in RECAP.findall(text):
        key = "failed" if int(failed) else "unreachable" if int(unreach) else "changed" if int(changed) else "ok"
        statuses[key] += 1
    return {"seconds": round(dt, 1), "rc": rc, "statuses": statuses, "command": " ".join(argv[1:])}


def check_fleet(farm: Farm, n: int) -> dict:
    resets = farm.resets()[:n]
    pending = farm.pending()[:n]
    return {
        "one_graceful_restart_each": sum(1 for r in resets if r == {"GracefulRestart": 1}),
        "other_resets": [r for r in resets if r != {"GracefulRestart": 1}][:5],
        "hosts_still_pending": sum(1 for p in pending if p),
    }


def batch_hosts(batch: str, n: int) -> int:
    return max(1, int(int(batch[:-1]) / 100.0 * n)) if batch.endswith("%") else int(batch)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--post", type=float, default=60.0)
    ap.add_argument("--batch", default="250")
    ap.add_argument("--ansible-hosts", type=int, default=200)
    ap.add_argument("--ansible-serial", default="25%")
    ap.add_argument("--sim-procs", type=int, default=2)
    ap.add_argument("--profile", default="epyc-gpudirect")
    ap.add_argument("--flavour", default="generic")
    ap.add_argument("--skip-large", action="store_true", help="only the side-by-side run")
    ap.add_argument("--skip-ansible", action="store_true", help="only the large run")
    ap.add_argument("--quick", action="store_true", help="smoke test: 40 hosts, 10 s POST, batch 10, 20 vs Ansible")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.quick:
        args.hosts, args.post, args.batch, args.ansible_hosts = 40, 10.0, "10", 20

    work = Path(tempfile.mkdtemp(prefix="numaforge-bench-waves-"))
    pw = "Bench-" + secrets.token_urlsafe(12)
    env = {**os.environ, PW_VAR: pw, "COLUMNS": "200", "NUMAFORGE_REDFISH_CACHE": str(work / "redfish")}
    env["ANSIBLE_HOST_KEY_CHECKING"] = "False"
    results: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "post_seconds": args.post,
        "argv": sys.argv[1:],
    }
    try:
        with Farm(procs=args.sim_procs) as farm:
            if not args.skip_large:
                bmcs = farm.start(args.hosts, args.flavour, pw, post=args.post)
                attrs = desired_attributes(work, bmcs, args.profile, env)
                inv = work / "inv-large.yaml"
                write_numaforge_inventory(inv, bmcs, args.profile)
                waves = math.ceil(args.hosts / batch_hosts(args.batch, args.hosts))
                r = numaforge_reboot(work, "large", inv, args.batch, args.post, env)
                r.update(check_fleet(farm, args.hosts), hosts=args.hosts, batch=args.batch, waves=waves)
                r["ideal_seconds"] = waves * args.post
                r["ratio_to_ideal"] = round(r["seconds"] / r["ideal_seconds"], 2)
                r["loadavg_after"] = os.getloadavg()
                results["large"] = r
                print(json.dumps({"large": r}, indent=1), flush=True)
            n = args.ansible_hosts
            if not args.skip_ansible and n:
                size = batch_hosts(args.ansible_serial, n)
                side: dict = {"hosts": n, "batch": args.ansible_serial, "batch_hosts": size}
                side["waves"] = math.ceil(n / size)
                side["ideal_seconds"] = side["waves"] * args.post
                bmcs = farm.start(n, args.flavour, pw, post=args.post)
                attrs = desired_attributes(work, bmcs, args.profile, env)
                inv = work / "inv-side.yaml"
                write_numaforge_inventory(inv, bmcs, args.profile)
                r = numaforge_reboot(work, "side", inv, args.ansible_serial, args.post, env)
                r.update(check_fleet(farm, n), loadavg_after=os.getloadavg())
                side["numaforge"] = r
                print(json.dumps({"numaforge": r}, indent=1), flush=True)
                bmcs = farm.start(n, args.flavour, pw, post=args.post)  # fresh BMCs for Ansible
                ainv, play = work / "ansible-inv.json", work / "reboot.yml"
                write_ansible_inventory(ainv, bmcs)
                play.write_text(PLAYBOOK.format(pw=PW_VAR, retries=int(args.post * 3 / 5) + 12))
                a = ansible_reboot(work, "side", ainv, play, attrs, size, env)
                a.update(check_fleet(farm, n), loadavg_after=os.getloadavg())
                side["ansible"] = a
                side["ansible_over_numaforge"] = round(a["seconds"] / max(0.01, r["seconds"]), 2)
                print(json.dumps({"ansible": a}, indent=1), flush=True)
                results["side_by_side"] = side
            results["simulator_errors"] = farm.errors()[:10]
    finally:
        results["loadavg_end"] = os.getloadavg()
        results["work"] = str(work)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
            print(f"wrote {args.json}")
        if not os.environ.get("NF_BENCH_KEEP"):
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({k: v for k, v in results.items() if k not in ("large", "side_by_side")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
