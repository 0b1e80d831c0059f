"""A small client of Prometheus's HTTP API (/api/v1/query) for the SLO canary gate.

    prom = Prometheus("https://prom.example:9090", ca_file=None, token=SecretRef("env:PROM_TOKEN"))
    ms = prom.p99_ms("http_request_duration_seconds", "instance", ["10.0.0.5:9100"], at=time.time(), range_s=60)

The P99 is ``histogram_quantile(q, sum by (le) (rate(METRIC_bucket{LABEL=~"a|b"}[RANGE])))`` over the hosts'
series, evaluated at ``at``; the histogram is in seconds (Prometheus's convention) and returned in ms. TLS is
verified (the system CAs, or ``ca_file``); a bearer token comes only by reference and is never printed.

Prometheus's answer is peer data (issue 40):

* every request has one total deadline (``timeout``, headers and body together: a watcher thread cuts the
  socket when it passes or when the run is stopped by Ctrl-C/SIGTERM) and a size cap (``MAX_ANSWER_BYTES``,
  named in the error);
* a redirect is never followed (the error names its Location): the bearer token is for the URL the operator gave;
* a P99 that is not a latency (negative, infinite, over ``MAX_P99_SECONDS``) and an answer of a shape a P99
  query cannot have are :class:`CannotTell` -- the gate's minute cannot tell, so it holds or rolls back on the
  skew, never widens. NaN (Prometheus's answer for a range with no observations) is "no data" (None).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Sequence
from urllib.parse import urlsplit

import requests

from ..errors import NumaforgeError
from ..secrets import redact, url_has_credentials
from ..watchedhttp import WatchedAdapter, watched

_METRIC = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
MAX_ANSWER_BYTES = 8 * 1024 * 1024  # one instant query's answer; a P99 query's is a few hundred bytes
MAX_P99_SECONDS = 3600.0  # a P99 above an hour is not a service latency the gate can judge
TIMEOUT = 10.0  # seconds for one request, headers and body


class PrometheusError(NumaforgeError):
    """Prometheus could not be asked, or answered something that is not a query result."""

    exit_code = 1


class CannotTell(PrometheusError):
    """Prometheus answered, but with a value or a shape a P99 cannot have: the minute cannot tell."""


def metric_problem(metric: str) -> str | None:
    return None if isinstance(metric, str) and _METRIC.match(metric) else f"not a Prometheus metric name: {metric!r}"


def label_problem(label: str) -> str | None:
    return None if isinstance(label, str) and _LABEL.match(label) else f"not a Prometheus label name: {label!r}"


def url_problem(url: str) -> str | None:
    """Why ``url`` is not a Prometheus base URL (http/https, a host, no credentials, query or fragment), or None.
    The URL itself is never in the text: it may hold a password."""
    if not isinstance(url, str) or not url:
        return "the Prometheus URL is empty"
    if any(ord(c) < 32 or ord(c) == 127 or c.isspace() for c in url):
        return "the Prometheus URL contains a control character or white space"
    if url_has_credentials(url):
        return (
            "the Prometheus URL carries credentials (user:password@ before the host name); they would be "
            "written into reports and sent in clear"
        )
    try:
        u = urlsplit(url)
        port_ok = u.port is None or 0 < u.port < 65536
    except ValueError:
        return "the Prometheus URL is not a URL like http(s)://host[:port][/path]"
    if u.scheme not in ("http", "https"):
        return f"the Prometheus URL's scheme is {u.scheme or 'missing'!r}; Prometheus's API is http or https"
    if not u.hostname or not port_ok:
        return "the Prometheus URL is not a URL like http(s)://host[:port][/path]"
    if u.query or u.fragment or url.endswith(("?", "#")):
        return "the Prometheus URL must not carry a ?query or #fragment"
    return None


def _quote_regex_alternative(value: str) -> str:
    """One exact value inside a PromQL =~ regex in a double-quoted string: regex-escaped, then string-escaped."""
    return re.escape(value).replace("\\", "\\\\").replace('"', '\\"')


def p99_query(metric: str, label: str, values: Sequence[str], range_s: float, quantile: float = 0.99) -> str:
    if problem := metric_problem(metric):
        raise NumaforgeError(
            problem,
            "--slo metric",
            "pass the histogram's base name, e.g. http_request_duration_seconds (without _bucket)",
        )
    if problem := label_problem(label):
        raise NumaforgeError(problem, "--slo label", "pass e.g. --slo label=instance")
    if not values:
        raise ValueError("p99_query needs at least one host")
    sel = "|".join(_quote_regex_alternative(v) for v in values)
    rng = f"{max(1, int(math.ceil(range_s)))}s"
    return f'histogram_quantile({quantile:g}, sum by (le) (rate({metric}_bucket{{{label}=~"{sel}"}}[{rng}])))'


# ------------------------------------------------------------------ one bounded request
@dataclass
class _Answer:
    status: int
    location: str | None
    body: bytes


def _get(url: str, params: dict, headers: dict, verify: bool | str, timeout: float, max_bytes: int) -> _Answer:
    """One GET, headers and body within ``timeout`` s in total and at most ``max_bytes``; no redirect followed.
    Raises _Cut (deadline/stop), _TooBig, or requests' own errors."""
    with watched(timeout, stop_grace=0.0, name="prometheus-deadline") as box:
        with requests.Session() as session:
            session.mount("http://", WatchedAdapter())
            session.mount("https://", WatchedAdapter())
            try:
                r = session.get(
                    url,
                    params=params,
                    headers=headers,
                    timeout=(timeout, timeout),
                    verify=verify,
                    allow_redirects=False,
                    stream=True,
                )
                with r:
                    if r.is_redirect or 300 <= r.status_code < 400:
                        answer = _Answer(r.status_code, r.headers.get("location"), b"")
                    else:
                        declared = r.headers.get("content-length", "")
                        if declared.isdigit() and int(declared) > max_bytes:
                            raise _TooBig(int(declared))
                        body = bytearray()
                        for chunk in r.iter_content(64 * 1024):
                            body += chunk
                            if len(body) > max_bytes:
                                raise _TooBig(None)
                        answer = _Answer(r.status_code, None, bytes(body))
            except (requests.RequestException, OSError) as exc:
                if box.get("cut"):
                    raise _Cut(box["cut"]) from None
                raise exc
            if box.get("cut"):  # a cut mid-headers can read as a short, complete answer: never use it
                raise _Cut(box["cut"])
            return answer


class _Cut(Exception):
    def __init__(self, reason: str):
        self.reason = reason


class _TooBig(Exception):
    def __init__(self, declared: int | None):
        self.declared = declared


def _peer_text(text: Any, limit: int = 200) -> str:
    """Peer text for a message: bounded, control characters escaped (repr)."""
    s = str(text)
    return repr(s[:limit] + ("..." if len(s) > limit else ""))


@dataclass
class Prometheus:
    url: str
    ca_file: str | None = None
    token: Any = None  # a numaforge.secrets.SecretRef (env:/file:), never a literal
    timeout: float = TIMEOUT  # one request, headers and body
    max_bytes: int = MAX_ANSWER_BYTES

    def query(self, promql: str, at: float) -> list:
        """The vector result of an instant query at time ``at`` (unix seconds). The answer's outer envelope
        must be Prometheus's (else PrometheusError); a data part that is not a vector is CannotTell."""
        endpoint = self.url.rstrip("/") + "/api/v1/query"
        headers = {}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token.resolve()}"
        verify: bool | str = self.ca_file or True
        check = "check --prometheus URL (and --prometheus-ca for a private CA) and that Prometheus is up"
        try:
            a = _get(endpoint, {"query": promql, "time": f"{at:.3f}"}, headers, verify, self.timeout, self.max_bytes)
        except _Cut as cut:
            if cut.reason == "stop":
                raise PrometheusError("Prometheus query stopped: the run was interrupted", endpoint, "") from None
            raise PrometheusError(
                f"Prometheus did not answer within {self.timeout:g} s (headers and body; the deadline of one query)",
                endpoint,
                "check that Prometheus (or a proxy in front of it) is not overloaded or stalling the answer",
            ) from None
        except _TooBig as big:
            size = f" ({big.declared} bytes declared)" if big.declared else ""
            raise PrometheusError(
                f"Prometheus's answer is larger than {self.max_bytes} bytes{size}, the cap for one query answer; "
                "not read further",
                endpoint,
                "check that --prometheus points at Prometheus's API and not at something that sends files",
            ) from None
        except (requests.RequestException, OSError) as exc:
            if "Connection broken" in str(exc):  # the headers came, then the connection was cut mid-body
                raise PrometheusError(
                    "Prometheus cut the connection in the middle of its answer; nothing of it was used",
                    endpoint,
                    "check Prometheus (or a proxy in front of it) for restarts or crashes, then re-run",
                ) from None
            raise PrometheusError(f"Prometheus query failed: {redact(str(exc))}", endpoint, check) from None
        if a.location is not None or 300 <= a.status < 400:
            raise PrometheusError(
                f"Prometheus answered HTTP {a.status}, a redirect to {_peer_text(a.location)}; numaforge does not "
                "follow redirects (the bearer token is for the URL you gave)",
                endpoint,
                "set --prometheus (or slo_gate prometheus) to the URL Prometheus serves its API at",
            )
        try:
            doc = json.loads(a.body)
        except (ValueError, RecursionError):
            doc = None
        if a.status != 200 or not isinstance(doc, dict) or doc.get("status") != "success":
            if isinstance(doc, dict) and "error" in doc:
                err = _peer_text(doc.get("error"))
            else:
                err = f"not Prometheus's API answer (starts {_peer_text(a.body[:80].decode('utf-8', 'replace'))})"
            raise PrometheusError(
                f"Prometheus answered HTTP {a.status}: {err}",
                endpoint,
                "check the query's metric and label (--slo metric=..., --slo label=...), that --prometheus is "
                "Prometheus's base URL, and Prometheus's log",
            )
        data = doc.get("data")
        if not isinstance(data, dict) or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
            kind = data.get("resultType") if isinstance(data, dict) else type(data).__name__
            raise CannotTell(
                f"Prometheus returned a {_peer_text(kind, 40)} result, not a vector",
                endpoint,
                "the P99 query must be an instant vector query",
            )
        return data["result"]

    def p99_ms(self, metric: str, label: str, values: Sequence[str], at: float, range_s: float) -> float | None:
        """The P99 latency in ms of the hosts' histogram over [at - range_s, at]; None when nothing was observed.
        CannotTell for a value that is not a latency or an answer of another shape (module docstring)."""
        result = self.query(p99_query(metric, label, values, range_s), at)
        if not result:
            return None
        fix = "check the metric is a histogram in seconds (METRIC_bucket with le labels) and its exporter"
        if len(result) != 1:
            raise CannotTell(
                f"Prometheus returned {len(result)} series for a P99 summed over the hosts (expected one)",
                self.url,
                fix,
            )
        sample = result[0]
        value = sample.get("value") if isinstance(sample, dict) else None
        raw = value[1] if isinstance(value, list) and len(value) == 2 else None
        try:
            if not isinstance(raw, str):
                raise ValueError
            seconds = float(raw)
        except ValueError:
            raise CannotTell(
                f"Prometheus returned a sample that is not a number: {_peer_text(sample)}", self.url, fix
            ) from None
        if math.isnan(seconds):
            return None
        if not 0.0 <= seconds <= MAX_P99_SECONDS:
            raise CannotTell(
                f"Prometheus returned a P99 of {_peer_text(raw, 40)} s: not a latency (negative, infinite or over "
                f"{MAX_P99_SECONDS:g} s)",
                self.url,
                fix,
            )
        return seconds * 1000.0
