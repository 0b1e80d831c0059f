"""A farm of simulated BMCs (numaforge.lab.bmc.BMCSimulator) in helper processes, for the BIOS benchmarks.

The simulators run in their own processes (``--procs``, default 2), never in the process being measured, so
numaforge and Ansible both talk to BMCs that do not share their interpreter. Every simulator listens on
127.0.0.1 with TLS (its own CA) and counts every HTTP request it serves.

    with Farm(procs=2) as farm:
        bmcs = farm.start(50, flavour="generic", password=pw)   # [{"url", "ca", "name"}]
        farm.counts()          # per BMC: {"total", "PATCH", "GET", "POST", "DELETE", "paths": {...},
                               #           "connections", "round_trips" (sequential, BMCSimulator.round_trips)}
        farm.reset_counts(); farm.comply(attrs); farm.restart(); farm.pending()

Protocol between this module and its helper processes: one JSON object per line on stdin/stdout.
Not a benchmark itself; used by bios_fleet.py and bios_scaling.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from numaforge.lab.bmc.tls import ensure_certificates  # noqa: E402 (after the repository is on the path)


class Farm:
    def __init__(self, procs: int = 2):
        self.procs = [
            subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--serve"],
                cwd=ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(max(1, procs))
        ]
        self.layout: list[tuple[int, int]] = []  # global index -> (proc, local index)

    def _send(self, i: int, msg: dict) -> None:
        stdin = self.procs[i].stdin
        if stdin is None:  # never: every process is started with stdin=PIPE
            raise RuntimeError(f"BMC farm process {i} has no stdin pipe")
        stdin.write(json.dumps(msg) + "\n")
        stdin.flush()

    def _receive(self, i: int):
        """The next reply of process ``i``: its "ok" value, or RuntimeError for an exit or an "error" reply."""
        p = self.procs[i]
        line = p.stdout.readline() if p.stdout is not None else ""
        if not line:
            raise RuntimeError(f"BMC farm process {i} exited (rc {p.poll()})")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"BMC farm process {i}: {reply['error']}")
        return reply["ok"]

    def _ask(self, i: int, msg: dict):
        self._send(i, msg)
        return self._receive(i)

    def _all(self, msg: dict) -> list:
        for i in range(len(self.procs)):  # send to all first: the processes work in parallel
            self._send(i, msg)
        return [self._receive(i) for i in range(len(self.procs))]

    def _merge(self, per_proc: list[list]) -> list:
        return [per_proc[p][k] for p, k in self.layout]

    def start(
        self, n: int, flavour: str, password: str, latency: float = 0.0, post: float = 0.0, tls_dir: str = ""
    ) -> list[dict]:
        """n fresh simulators; ``post`` > 0: a reset is a warm restart (PowerState stays On) followed by ``post``
        seconds of POST (BootProgress before OSRunning), as on a real server (bios_reboot_waves.py). ``tls_dir``:
        every simulator serves the CA and certificate made there (one site CA, as ``--fleet`` does); else each
        makes its own."""
        if tls_dir:  # made here, once, before any process reads it
            ensure_certificates(Path(tls_dir), "127.0.0.1")
        share = [n // len(self.procs) + (1 if i < n % len(self.procs) else 0) for i in range(len(self.procs))]
        self.layout = []
        for i in range(n):  # round-robin: bmc i lives in process i % procs
            self.layout.append((i % len(self.procs), i // len(self.procs)))
        for i in range(len(self.procs)):
            self._send(
                i,
                {
                    "cmd": "start",
                    "n": share[i],
                    "flavour": flavour,
                    "password": password,
                    "latency": latency,
                    "post": post,
                    "tls_dir": tls_dir,
                },
            )
        per = [self._receive(i) for i in range(len(self.procs))]
        bmcs = self._merge(per)
        for i, b in enumerate(bmcs):
            b["name"] = f"bmc{i:03d}"
        return bmcs

    def restart(self) -> list[dict]:
        """Fresh simulators (factory BIOS values, no pending, new ports and CAs) in place of the current ones."""
        bmcs = self._merge(self._all({"cmd": "restart"}))
        for i, b in enumerate(bmcs):
            b["name"] = f"bmc{i:03d}"
        return bmcs

    def counts(self) -> list[dict]:
        return self._merge(self._all({"cmd": "counts"}))

    def reset_counts(self) -> None:
        self._all({"cmd": "reset"})

    def comply(self, attrs: dict) -> None:
        """Make every BMC's current BIOS values equal ``attrs`` (as if set in BIOS setup; nothing pending)."""
        self._all({"cmd": "comply", "attrs": attrs})

    def resets(self) -> list[dict]:
        """ComputerSystem.Reset requests each BMC received, by ResetType."""
        return self._merge(self._all({"cmd": "resets"}))

    def pending(self) -> list[dict]:
        return self._merge(self._all({"cmd": "pending"}))

    def current(self) -> list[dict]:
        return self._merge(self._all({"cmd": "current"}))

    def errors(self) -> list[str]:
        return [e for per in self._all({"cmd": "errors"}) for e in per]

    def close(self) -> None:
        for i, p in enumerate(self.procs):
            try:
                self._send(i, {"cmd": "stop"})
                if p.stdin is not None:
                    p.stdin.close()
            except OSError:
                pass
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def per_host_summary(counts: list[dict]) -> dict:
    """Mean / max requests and PATCHes per BMC over a list of count dicts."""
    n = len(counts) or 1
    tot = [c["total"] for c in counts]
    patch = [c.get("PATCH", 0) for c in counts]
    return {
        "hosts": len(counts),
        "requests_total": sum(tot),
        "requests_mean": round(sum(tot) / n, 2),
        "requests_max": max(tot, default=0),
        "requests_min": min(tot, default=0),
        "patch_total": sum(patch),
        "patch_max": max(patch, default=0),
        "connections_mean": round(sum(c.get("connections", 0) for c in counts) / n, 2),
        "connections_max": max((c.get("connections", 0) for c in counts), default=0),
        "round_trips_mean": round(sum(c.get("round_trips", 0) for c in counts) / n, 2),
        "round_trips_max": max((c.get("round_trips", 0) for c in counts), default=0),
    }


# -- helper process ----------------------------------------------------------------------------------------
def _serve() -> None:
    sys.path.insert(0, str(ROOT))
    import shutil
    import tempfile

    from numaforge.lab.bmc.fleet import TLS_FILES
    from numaforge.lab.bmc.server import BMCSimulator, Hub

    hub = Hub()  # one accepting thread for every simulator of this process (an idle BMC costs no thread)
    sims: list = []
    shared_dirs: list[Path] = []
    spec: dict = {}

    def state_dir(tls_dir: str):
        """None (the simulator's own temporary directory and CA), or a directory linked to the shared CA."""
        if not tls_dir:
            return None
        d = Path(tempfile.mkdtemp(prefix="bmc-farm-"))
        for f in TLS_FILES:
            (d / f).symlink_to(Path(tls_dir) / f)
        shared_dirs.append(d)
        return d

    def launch():
        sims.extend(
            BMCSimulator(
                flavour=spec["flavour"],
                host="127.0.0.1",
                port=0,
                tls=True,
                username="admin",
                password=spec["password"],
                power_delay=0.5,
                latency=spec["latency"],
                state_dir=state_dir(spec["tls_dir"]),
            ).start(hub=hub)
            for _ in range(spec["n"])
        )
        for s in sims:
            if spec.get("post"):
                s.state.warm_restart, s.state.post_seconds = True, float(spec["post"])
        return [{"url": s.url, "ca": str(s.ca_file)} for s in sims]

    def stop_all():
        for s in sims:
            s.stop()
        sims.clear()
        for d in shared_dirs:
            shutil.rmtree(d, ignore_errors=True)
        shared_dirs.clear()

    for line in sys.stdin:
        msg = json.loads(line)
        cmd = msg["cmd"]
        try:
            if cmd == "start":
                stop_all()
                spec = {
                    "flavour": msg["flavour"],
                    "password": msg["password"],
                    "n": msg["n"],
                    "latency": msg.get("latency", 0.0),
                    "post": msg.get("post", 0.0),
                    "tls_dir": msg.get("tls_dir", ""),
                }
                out = launch()
            elif cmd == "restart":
                stop_all()
                out = launch()
            elif cmd == "counts":
                out = []
                for s in sims:
                    reqs = list(s.requests)
                    c = Counter(m for m, _ in reqs)
                    out.append(
                        {
                            "total": len(reqs),
                            **c,
                            "paths": dict(Counter(f"{m} {p}" for m, p in reqs)),
                            "connections": s.connections,
                            "tls_resumed": s.tls_resumed,
                            "round_trips": s.round_trips(),
                        }
                    )
            elif cmd == "reset":
                out = [s.reset_counts() for s in sims]
            elif cmd == "comply":
                for s in sims:
                    s.set_bios(**msg["attrs"])
                out = True
            elif cmd == "resets":
                out = [dict(s.state.resets) for s in sims]
            elif cmd == "pending":
                out = [s.bios_pending() for s in sims]
            elif cmd == "current":
                out = [s.bios_current() for s in sims]
            elif cmd == "errors":
                out = [e for s in sims for e in s.errors]
            elif cmd == "stop":
                stop_all()
                hub.close()
                print(json.dumps({"ok": True}), flush=True)
                return
            else:
                raise ValueError(f"unknown command {cmd}")
            print(json.dumps({"ok": out}), flush=True)
        except Exception as exc:  # report to the parent instead of dying silently
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
    stop_all()


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        _serve()
    else:
        print(__doc__)
