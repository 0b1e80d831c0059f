"""Fault cases against a BMC: the simulator (numaforge.lab.bmc) with injected faults, and the hostile recorder
(hostile.py) at the other end of redirects or with a certificate for another name. Tier: bmc."""

from __future__ import annotations

from pathlib import Path

from harness import Case, Outcome, cli
from hostile import Recorder

PASSWORD = "fault-Bmc-pw-31"
PW_VAR = "NF_FAULT_SIM_PW"
SESSIONS = "/redfish/v1/SessionService/Sessions"


def bmc_case(*args: str, setup=None, allowed_pending: bool = False, flavour: str = "generic"):
    """Run ``invoke ARGS`` against one simulated BMC prepared by ``setup(ctx)``. Writes counted: anything the
    recorders received, BIOS values pending on the BMC (unless allowed), resets requested."""

    def run(tmp: Path) -> Outcome:
        from numaforge.lab.bmc import BMCSimulator

        sim = BMCSimulator(flavour=flavour, tls=True, username="admin", password=PASSWORD, power_delay=0.2).start()
        rec = Recorder(cert=sim.state_dir / "server.pem", key=sim.state_dir / "server.key")
        plain = Recorder()
        ctx = {"sim": sim, "rec": rec, "plain": plain, "tmp": tmp, "url": sim.url, "ca": sim.ca_file}
        try:
            if setup:
                setup(ctx)
            inv = tmp / "inv.yaml"
            inv.write_text(
                "hosts:\n  h1:\n"
                f"    bmc: {{url: '{ctx['url']}', username: admin, password: 'env:{PW_VAR}', "
                # auth: session -- the campaign's BMC cases are built around a login session (a redirected
                # login, echoed X-Auth-Tokens, the logout after a stop); HTTP Basic is tests/bios/test_bmc_auth_bmc.py's
                f"ca_bundle: '{ctx['ca']}', vendor: {flavour}, auth: session}}\n"
                "    hardware: {sockets: 2, gpus: ['0000:41:00.0']}\n"
                "    bios_profile: epyc-gpudirect\n"
                # the write path under attack; unverified values are refused by default (issue 39 item 5)
                "    vars: {bios_unverified: allow}\n"
            )
            import os

            os.environ[PW_VAR] = PASSWORD
            out = cli(*args, "--inventory", str(inv), "--json", str(tmp / "r.json"), report=tmp / "r.json")
            got = rec.requests + plain.requests + (ctx["extra"].requests if "extra" in ctx else [])
            refused = sum(1 for kind, m, p in sim.faults.fired if m == "POST" and p.endswith("Reset"))
            out.writes = len(got) + sim.count("POST", "Reset") - refused
            if not allowed_pending and sim.bios_pending():
                out.writes += 1
            out.output += "\n[what the hostile endpoints received]\n" + rec.text() + plain.text()
            out.secrets = list(sim.issued_tokens) + [PASSWORD]
            return out
        finally:
            rec.stop()
            plain.stop()
            if "extra" in ctx:
                ctx["extra"].stop()
            sim.stop()

    return run


def fault(kind: str, path: str, method: str | None = None, **options):
    def setup(ctx):
        opts = {
            k: (v.format(**ctx, rec_port=ctx["rec"].port, plain_port=ctx["plain"].port) if isinstance(v, str) else v)
            for k, v in options.items()
        }
        p = ctx["sim"].__getattribute__(path) if path.endswith("_path") else path
        ctx["sim"].inject(kind, f"^{p}$" if not path.startswith("^") else path, method=method, count=50, **opts)

    return setup


OTHER_HTTPS = "https://127.0.0.1:{rec_port}/redfish/v1/Systems/1"
PLAIN_HTTP = "http://127.0.0.1:{plain_port}/redfish/v1/steal"
REDIRECT_MSG = r"answered {status}, a redirect to {where}.*never follows redirects.*fix: set bmc.url"

REDIRECT_CASES = []
for name, cmd, path, method, status, loc, where in [
    ("get-system-302-other-https", "bios-plan", "system_path", "GET", 302, OTHER_HTTPS, "https://127.0.0.1"),
    ("get-bios-301-plain-http", "bios-plan", "bios_path", "GET", 301, PLAIN_HTTP, "http://127.0.0.1"),
    ("get-root-302", "bios-plan", "/redfish/v1/?", "GET", 302, OTHER_HTTPS, "https://127.0.0.1"),
    ("get-settings-307", "bios-plan", "settings_path", "GET", 307, PLAIN_HTTP, "http://127.0.0.1"),
    ("get-bios-308", "bios-apply", "bios_path", "GET", 308, OTHER_HTTPS, "https://127.0.0.1"),
    ("patch-307-plain-http", "bios-apply", "settings_path", "PATCH", 307, PLAIN_HTTP, "http://127.0.0.1"),
    ("patch-308-other-https", "bios-apply", "settings_path", "PATCH", 308, OTHER_HTTPS, "https://127.0.0.1"),
    ("patch-302", "bios-apply", "settings_path", "PATCH", 302, PLAIN_HTTP, "http://127.0.0.1"),
    ("patch-303", "bios-apply", "settings_path", "PATCH", 303, OTHER_HTTPS, "https://127.0.0.1"),
    (
        "get-relative-location",
        "bios-plan",
        "^/redfish/v1/Systems/?$",
        "GET",
        302,
        "/redfish/v1/elsewhere",
        "/redfish/v1/elsewhere",
    ),
]:
    REDIRECT_CASES.append(
        Case(
            f"bmc/redirect-{name}",
            "bmc",
            bmc_case(cmd, setup=fault("redirect", path, method, status=status, location=loc)),
            REDIRECT_MSG.format(status=status, where=where),
            code=1,
            tier="bmc",
        )
    )
REDIRECT_CASES += [
    Case(
        "bmc/redirect-session-login-302",
        "bmc",
        bmc_case("bios-plan", setup=fault("redirect", SESSIONS, "POST", status=302, location=PLAIN_HTTP)),
        r"session login\) answered HTTP 302, a redirect.*never follows",
        code=1,
        tier="bmc",
    ),
    Case(
        "bmc/redirect-reset-307",
        "bmc",
        bmc_case(
            "bios-apply",
            "--reboot",
            "--graceful-timeout",
            "2",
            "--power-timeout",
            "5",
            allowed_pending=True,
            setup=fault("redirect", r"^.*Reset$", "POST", status=307, location=PLAIN_HTTP),
        ),
        r"answered 307, a redirect to http://127\.0\.0\.1.*never follows",
        code=None,
        tier="bmc",
    ),
    Case(
        "bmc/redirect-logout-302",
        "bmc",
        bmc_case(
            "bios-plan",
            setup=fault(
                "redirect", r"^/redfish/v1/SessionService/Sessions/.+", "DELETE", status=302, location=PLAIN_HTTP
            ),
        ),
        r"logout failed",
        ok=True,
        tier="bmc",
    ),
]

ECHO_CASES = [
    Case(
        f"bmc/echo-{name}",
        "bmc",
        bmc_case(cmd, setup=fault("echo", path, method, status=status)),
        r"request rejected \[/b\]\[red\]:smile: 0000:3b:00\.0; headers were: X-Auth-Token=\*{8}",
        tier="bmc",
    )
    for name, cmd, path, method, status in [
        ("get-bios-400", "bios-plan", "bios_path", "GET", 400),
        ("get-systems-404", "bios-plan", "^/redfish/v1/Systems/?$", "GET", 404),
        ("patch-400", "bios-apply", "settings_path", "PATCH", 400),
        ("patch-409", "bios-apply", "settings_path", "PATCH", 409),
        ("get-settings-403", "bios-verify", "settings_path", "GET", 403),
    ]
]


def _closed_port(ctx):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    ctx["url"] = f"https://127.0.0.1:{port}"


def _other_name(ctx):
    from numaforge.lab.bmc.tls import ensure_certificates

    ca, cert, key = ensure_certificates(ctx["tmp"] / "other", "bmc-other.example")
    # the simulator's certificates always name localhost and 127.0.0.1: serve on another loopback address
    ctx["extra"] = Recorder(cert=cert, key=key, host="127.0.0.2")
    ctx["url"] = f"https://127.0.0.2:{ctx['extra'].port}"
    ctx["ca"] = ca


def _unknown_ca(ctx):
    from numaforge.lab.bmc.tls import ensure_certificates

    ctx["ca"] = ensure_certificates(ctx["tmp"] / "other", "127.0.0.1")[0]


ERROR_CASES = [
    Case(
        "bmc/patch-401",
        "bmc",
        bmc_case("bios-apply", setup=fault("5xx", "settings_path", "PATCH", status=401)),
        r"answered 401 \(authentication refused.*nothing was written.*fix: check bmc\.username",
        code=1,
        tier="bmc",
    ),
    Case(
        "bmc/patch-403",
        "bmc",
        bmc_case("bios-apply", setup=fault("5xx", "settings_path", "PATCH", status=403)),
        r"answered 403 \(forbidden.*nothing was written.*ConfigureComponents",
        code=1,
        tier="bmc",
    ),
    Case(
        "bmc/connection-refused",
        "bmc",
        bmc_case("bios-plan", setup=_closed_port),
        r"connection refused by 127\.0\.0\.1:\d+.*fix: nothing listens there",
        code=1,
        tier="bmc",
    ),
    Case(
        "bmc/tls-hostname-mismatch",
        "bmc",
        bmc_case("bios-plan", setup=_other_name),
        r"TLS hostname mismatch: the BMC's certificate is not valid for '127\.0\.0\.2' .*fix: write in bmc\.url the name",
        code=1,
        tier="bmc",
    ),
    Case(
        "bmc/tls-unknown-ca",
        "bmc",
        bmc_case("bios-plan", setup=_unknown_ca),
        r"TLS certificate of the BMC could not be verified.*fix: set bmc\.ca_bundle",
        code=1,
        tier="bmc",
    ),
    Case(
        "bmc/patch-bad-json",
        "bmc",
        bmc_case("bios-apply", setup=fault("bad_json", "settings_path", "PATCH")),
        r"PATCH .* (invalid JSON|answered)",
        tier="bmc",
    ),
    Case(
        "bmc/get-503-forever",
        "bmc",
        bmc_case("bios-plan", setup=fault("503", "bios_path", "GET", retry_after=0)),
        r"HTTP 503 \(gave up after \d attempts\).*busy",
        code=1,
        tier="bmc",
    ),
]


# issue 40 item 2: bounded in time (headers at once, then a dripping body) and in size (a 100 MB answer)
DRIP_BODY_MSG = (
    r"--host-timeout of 3 s; stopped before the answer to (GET|POST) .* \(cut: the BMC had not finished answering"
)
BOUNDED_CASES = [
    Case(
        f"hang/drip-body-{name}",
        "bmc-hang",
        bmc_case(cmd, "--host-timeout", "3", setup=fault("drip_body", path, method, interval=0.5)),
        DRIP_BODY_MSG,
        code=1,
        tier="bmc",
    )
    for name, cmd, path, method in [
        ("get-root", "bios-plan", "^/redfish/v1/?$", "GET"),
        ("get-system", "bios-plan", "system_path", "GET"),
        ("get-bios", "bios-plan", "bios_path", "GET"),
        ("get-settings-apply", "bios-apply", "settings_path", "GET"),
        ("session-login", "bios-plan", SESSIONS, "POST"),
        ("verify-get-bios", "bios-verify", "bios_path", "GET"),
    ]
] + [
    Case(
        f"size/huge-{name}",
        "bmc-size",
        bmc_case(cmd, setup=fault("huge", path, "GET", size=100 * 1024 * 1024, length=length)),
        rf"GET .*: the BMC's answer is larger than the 8 MiB cap for a {kind} .*fix: ",
        code=1,
        tier="bmc",
    )
    for name, cmd, path, length, kind in [
        ("bios-100mb", "bios-apply", "bios_path", True, "BIOS resource"),
        ("bios-100mb-no-length", "bios-apply", "bios_path", False, "BIOS resource"),
        ("settings-100mb", "bios-apply", "settings_path", True, "BIOS resource"),
        ("system-100mb-no-length", "bios-plan", "system_path", False, "Redfish resource"),
    ]
]


def _attributes_as(shape, path_attr: str):
    """The real document at the simulator's ``path_attr``, its Attributes replaced by null or a list of pairs."""

    def setup(ctx):
        import requests

        sim = ctx["sim"]
        path = getattr(sim, path_attr)
        doc = requests.get(sim.url + path, auth=("admin", PASSWORD), verify=str(sim.ca_file), timeout=10).json()
        pairs = [[k, v] for k, v in (doc.get("Attributes") or {}).items()] or [["ProcCStates", "Disabled"]]
        doc["Attributes"] = None if shape == "null" else pairs
        sim.inject("answer", f"^{path}$", method="GET", count=100, body=doc)

    return setup


# issue 40 item 3: a document of the wrong shape is refused before anything is written
SHAPE_CASES = [
    Case(
        f"shape/{which}-attributes-{shape}",
        "bmc",
        bmc_case("bios-apply", setup=_attributes_as(shape, f"{which}_path")),
        rf"answered Attributes as {'null' if shape == 'null' else 'a JSON list'}, not an object.*fix: ",
        code=1,
        tier="bmc",
    )
    for which in ("bios", "settings")
    for shape in ("null", "list")
]


# issue 40 item 3: a PATCH cut on the wire by --host-timeout (the BMC applies it, then answers 8 s late) is
# reported from what the BMC holds (the values are pending on purpose: the BMC took them)
WRITE_CASES = [
    Case(
        "write/patch-cut-by-host-timeout",
        "bmc",
        bmc_case(
            "bios-apply",
            "--host-timeout",
            "3",
            setup=fault("slow", "settings_path", "PATCH", after=True, seconds=8),
            allowed_pending=True,
        ),
        r"--host-timeout of 3 s.*written before it stopped: .*outcome unknown .*re-read: the BMC holds (\d+) of the "
        r"\1 values sent",
        code=1,
        tier="bmc",
    ),
]


def cases() -> list[Case]:
    return REDIRECT_CASES + ECHO_CASES + ERROR_CASES + BOUNDED_CASES + SHAPE_CASES + WRITE_CASES
