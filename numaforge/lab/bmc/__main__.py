"""Run one simulated BMC as a daemon (for lab-up), or a fleet of them:

    python -m numaforge.lab.bmc --flavour dell --port 8443 --state-dir .lab/bmc
    python -m numaforge.lab.bmc --mockup tests/data/captures/libredfish-hpe-dl385-gen10p --port 8443 --state-dir .lab/bmc
    python -m numaforge.lab.bmc --fleet 6 --flavours dell-16g,hpe-gen11,smc-h13 --state-dir /tmp/fleet

Writes STATE_DIR/{ca.pem,password,pid,url}; `password` (mode 0600) holds a random password, kept across
restarts, for a `file:` secret reference in the inventory. Stops cleanly on SIGTERM/SIGINT (pid and url files
are removed). Exit 2 with a message for bad options or a busy port.

With --fleet N (numaforge.lab.bmc.fleet): N BMCs in this one process, the --flavours in turn (default: every
flavour), ports from --ports LO-HI or any free ones, one CA (STATE_DIR/tls/ca.pem), one password file and their
inventory STATE_DIR/inventory.yaml, written once every BMC listens; `ready` appears after it.

With --mockup DIR (numaforge.lab.bmc.mockup): serve a captured tree (DMTF mockup layout) as it is, with the same
password file and CA; STATE_DIR/system_id names the system with a Bios the daemon serves.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from ...errors import NumaforgeError
from .errors import BMCSimulatorError
from .flavours import ALL_FLAVOURS
from .fleet import Fleet, parse_flavours, parse_ports, state_password
from .mockup import MockupSimulator
from .server import BMCSimulator


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m numaforge.lab.bmc", description="numaforge Redfish BMC simulator")
    ap.add_argument("--flavour", choices=ALL_FLAVOURS, help="vendor shape of the BMC (default generic)")
    ap.add_argument(
        "--mockup", metavar="DIR", help="serve this captured Redfish tree (DMTF mockup layout) instead of a flavour"
    )
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=8443, help="TCP port (0 = any free port; see STATE_DIR/url)")
    ap.add_argument("--state-dir", default=".lab/bmc", help="where ca.pem, password, pid, url and state live")
    ap.add_argument("--username", default="admin", help="account name (default admin)")
    ap.add_argument("--power-delay", type=float, default=5.0, help="seconds a power transition takes")
    ap.add_argument("--no-tls", action="store_true", help="serve plain HTTP (tests of the --insecure path only)")
    ap.add_argument("--verbose", action="store_true", help="log every request")
    ap.add_argument("--fleet", type=int, metavar="N", help="start N BMCs in this process and write their inventory")
    ap.add_argument(
        "--flavours", metavar="A,B,...", help="with --fleet: the flavours, taken in turn (default: every flavour)"
    )
    ap.add_argument(
        "--ports", metavar="LO-HI", help="with --fleet: take the BMCs' ports from this range (default: any free)"
    )
    args = ap.parse_args(argv)
    if not 0 <= args.power_delay <= 3600:
        ap.error("--power-delay must be between 0 and 3600 seconds")
    if args.mockup is not None and (args.flavour is not None or args.fleet is not None):
        ap.error("--mockup DIR serves one captured tree: it goes without --flavour and --fleet")
    if args.fleet is not None:
        return fleet_main(args)
    if args.flavours is not None or args.ports is not None:
        ap.error("--flavours and --ports go with --fleet N (one BMC takes --flavour and --port)")
    state_dir = Path(args.state_dir)
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        pid_file = state_dir / "pid"
        if pid_file.exists():
            try:
                other = int(pid_file.read_text().strip())
                os.kill(other, 0)
            except (ValueError, ProcessLookupError, PermissionError):
                pass
            else:
                raise BMCSimulatorError(
                    f"a simulator (pid {other}) already runs with this state directory",
                    str(state_dir),
                    f"stop it (kill {other}) or use another --state-dir",
                )
        common = dict(
            host=args.host,
            port=args.port,
            tls=not args.no_tls,
            username=args.username,
            password=state_password(state_dir),
            power_delay=args.power_delay,
            state_dir=state_dir,
            verbose=args.verbose,
        )
        if args.mockup is not None:
            sim: BMCSimulator = MockupSimulator(args.mockup, **common)
            (state_dir / "system_id").write_text(sim.system_path.rstrip("/").rsplit("/", 1)[-1] + "\n")
        else:
            sim = BMCSimulator(flavour=args.flavour or "generic", **common)
        sim.start()
    except NumaforgeError as exc:
        print(f"error: {exc.render()}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        print(f"error: {state_dir}: {exc.strerror}\n  fix: choose a writable --state-dir", file=sys.stderr)
        return 2
    pid_file.write_text(f"{os.getpid()}\n")
    tmp = state_dir / "url.tmp"  # atomic: readers wait for `url` to exist, then read it whole
    tmp.write_text(sim.url + "\n")
    os.replace(tmp, state_dir / "url")
    print(
        f"bmc-sim: {sim._display_name()} BMC at {sim.url} (user {args.username}, password file:{state_dir / 'password'}"
        + (f", CA {sim.ca_file}" if sim.ca_file else "")
        + ")",
        flush=True,
    )
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    sim.stop()
    for name in ("pid", "url"):
        try:
            (state_dir / name).unlink()
        except FileNotFoundError:
            pass
    print("bmc-sim: stopped", flush=True)
    return 0


def fleet_main(args) -> int:
    """--fleet N: start the fleet, write its inventory and `ready`, serve until SIGTERM/SIGINT."""
    state_dir = Path(args.state_dir)
    pid_file = state_dir / "pid"
    done = threading.Event()  # set by SIGTERM/SIGINT, also while the fleet starts: it then stops at once
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    try:
        fleet = Fleet(
            args.fleet,
            parse_flavours(args.flavours),
            state_dir,
            host=args.host,
            ports=parse_ports(args.ports),
            username=args.username,
            power_delay=args.power_delay,
        )
        state_dir.mkdir(parents=True, exist_ok=True)
        (state_dir / "ready").unlink(missing_ok=True)
        fleet.start()
    except NumaforgeError as exc:
        print(f"error: {exc.render()}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        print(f"error: {state_dir}: {exc.strerror}\n  fix: choose a writable --state-dir", file=sys.stderr)
        return 2
    try:
        pid_file.write_text(f"{os.getpid()}\n")
        for m in fleet.members:
            print(f"bmc-sim: {m.name}: {m.flavour} BMC at {m.sim.url}", flush=True)
        (state_dir / "ready").write_text(f"{len(fleet.members)}\n")
        print(
            f"bmc-sim: fleet of {len(fleet.members)} (user {args.username}, password file:{fleet.password_file}, "
            f"CA {fleet.ca_file}); inventory {fleet.inventory}",
            flush=True,
        )
        done.wait()
    finally:
        fleet.stop()
        for name in ("pid", "ready"):
            (state_dir / name).unlink(missing_ok=True)
    print("bmc-sim: fleet stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
