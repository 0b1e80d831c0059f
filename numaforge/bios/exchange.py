"""What one Redfish exchange is made of, shared by the client (numaforge.bios.redfish) and the resources
(numaforge.bios.resources): the answer (``Response``), the retry and timeout policy (``RetryPolicy``), a link
turned into the path the client asks for (``path_of``), the transport adapter that refuses redirects
(``NoRedirects``) and the machine's CA store (``default_ca_file``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlparse

import certifi

from ..defaults import BMC_CONNECT_TIMEOUT, BMC_READ_TIMEOUT, BMC_RETRIES, BMC_TOTAL_TIMEOUT
from .deadline import DeadlineAdapter

REFUSED_LOCATION = "x-numaforge-refused-location"


class NoRedirects(DeadlineAdapter):
    """Transport adapter that makes redirects unfollowable: requests follows a 3xx only when it carries a
    Location header, so the header is moved aside (REFUSED_LOCATION) before the session sees the response.
    The redfish library calls requests with allow_redirects=True on most requests and offers no switch; an
    adapter is its public extension point (``https_adapter``), so this covers login, every request and
    logout alike. Every request also has a total deadline and ends on Ctrl-C/SIGTERM (DeadlineAdapter)."""

    def build_response(self, req, resp):
        r = super().build_response(req, resp)
        if 300 <= r.status_code < 400 and "location" in r.headers:
            r.headers[REFUSED_LOCATION] = r.headers.pop("location")
        return r


@dataclass
class Response:
    status: int
    body: dict
    headers: dict
    path: str

    @property
    def etag(self) -> str | None:
        return self.headers.get("etag") or (self.body.get("@odata.etag") if isinstance(self.body, dict) else None)

    def error_text(self) -> str:
        """Redfish @Message.ExtendedInfo messages (or the status) for error reports."""
        err = self.body.get("error") if isinstance(self.body, dict) else None
        if isinstance(err, dict):
            infos = err.get("@Message.ExtendedInfo") or []
            msgs = [
                f"{i.get('MessageId', '')}: {i.get('Message', '')}".strip(": ") for i in infos if isinstance(i, dict)
            ]
            if msgs:
                return "; ".join(msgs)
            if err.get("message"):
                return str(err["message"])
        return f"HTTP {self.status}"


@dataclass
class RetryPolicy:
    attempts: int = BMC_RETRIES + 1  # total tries for a retryable request (--bmc-retries + 1)
    backoff: float = 0.5  # first wait (s), doubled each time
    max_wait: float = 10.0  # cap of one wait, Retry-After included
    connect_timeout: float = BMC_CONNECT_TIMEOUT  # --bmc-connect-timeout (TCP connect and TLS handshake)
    read_timeout: float = BMC_READ_TIMEOUT  # --bmc-read-timeout: one read; a read timeout is not retried
    total_timeout: float = BMC_TOTAL_TIMEOUT  # one request, all its reads (a BMC dripping its answer byte by byte)


def path_of(link: str) -> str:
    """A link may be absolute (https://bmc/redfish/v1/...) or a path; the client wants the path."""
    if link.startswith(("http://", "https://")):
        p = urlparse(link)
        return p.path + (f"?{p.query}" if p.query else "")
    return link


def default_ca_file() -> str:
    """The machine's CA store: $REQUESTS_CA_BUNDLE, $SSL_CERT_FILE, Debian's bundle, else certifi's."""
    for candidate in (
        os.environ.get("REQUESTS_CA_BUNDLE"),
        os.environ.get("SSL_CERT_FILE"),
        "/etc/ssl/certs/ca-certificates.crt",
    ):
        if candidate and os.path.isfile(candidate):
            return candidate
    return certifi.where()  # what requests itself uses when no CA bundle is given
