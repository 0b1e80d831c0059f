"""A small client of Prometheus's HTTP API (/api/v1/query) for the SLO canary gate.

    prom = Prometheus("https://prom.example:9090", ca_file=None, token=SecretRef("env:PROM_TOKEN"))
    ms = prom.p99_ms("http_request_duration_seconds", "instance", ["10.0.0.5:9100"], at=time.time(), range_s=60)

The P99 is ``histogram_quantile(q, sum by (le) (rate(METRIC_bucket{LABEL=~"a|b"}[RANGE])))`` over the hosts'
series, evaluated at ``at``; the histogram is in seconds (Prometheus's convention) and returned in ms. TLS is
verified (the system CAs, or ``ca_file``); a bearer token comes only by reference and is never printed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Sequence
from urllib.parse import urlsplit

import requests

from ..errors import NumaforgeError
from ..secrets import redact, url_has_credentials

_METRIC = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class PrometheusError(NumaforgeError):
    """Prometheus could not be asked, or answered something that is not a query result."""

    exit_code = 1


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


@dataclass
class Prometheus:
    url: str
    ca_file: str | None = None
    token: Any = None  # a numaforge.secrets.SecretRef (env:/file:), never a literal
    timeout: float = 10.0

    def query(self, promql: str, at: float) -> list[dict]:
        """The vector result of an instant query at time ``at`` (unix seconds)."""
        endpoint = self.url.rstrip("/") + "/api/v1/query"
        headers = {}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token.resolve()}"
        verify: bool | str = self.ca_file or True
        try:
            r = requests.get(
                endpoint,
                params={"query": promql, "time": f"{at:.3f}"},
                headers=headers,
                timeout=self.timeout,
                verify=verify,
            )
        except requests.RequestException as exc:
            raise PrometheusError(
                f"Prometheus query failed: {redact(str(exc))}",
                endpoint,
                "check --prometheus URL (and --prometheus-ca for a private CA) and that Prometheus is up",
            ) from None
        try:
            doc = r.json()
        except ValueError:
            doc = None
        if r.status_code != 200 or not isinstance(doc, dict) or doc.get("status") != "success":
            err = doc.get("error") if isinstance(doc, dict) else r.text[:200]
            raise PrometheusError(
                f"Prometheus answered HTTP {r.status_code}: {err}",
                endpoint,
                "check the query's metric and label (--slo metric=..., --slo label=...) and Prometheus's log",
            )
        data = doc.get("data") or {}
        if data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
            raise PrometheusError(
                f"Prometheus returned a {data.get('resultType')!r} result, not a vector",
                endpoint,
                "the P99 query must be an instant vector query",
            )
        return data["result"]

    def p99_ms(self, metric: str, label: str, values: Sequence[str], at: float, range_s: float) -> float | None:
        """The P99 latency in ms of the hosts' histogram over [at - range_s, at]; None when nothing was observed."""
        result = self.query(p99_query(metric, label, values, range_s), at)
        if not result:
            return None
        try:
            seconds = float(result[0]["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            raise PrometheusError(
                f"Prometheus returned a sample that is not a number: {str(result[0])[:200]}",
                self.url,
                "check the metric is a histogram (METRIC_bucket with le labels)",
            ) from None
        return None if math.isnan(seconds) or math.isinf(seconds) else seconds * 1000.0
