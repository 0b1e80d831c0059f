"""Thin adapter over DMTF's `redfish` library: HTTP Basic or session auth, logout always, verified TLS,
safe retries, ETags, parallel reads. Everything vendor-specific or BIOS-specific lives above it (numaforge.bios.resources and the
apply modules).

Authentication (``auth``; the inventory's ``bmc.auth``): "session" logs in (POST to the sessions collection,
basic as fallback) and out (DELETE); "basic" sends HTTP Basic with every request, no login or logout request;
"auto" (the default) is basic over verified TLS, a session on an ``insecure`` connection or (once) when the BMC
refuses Basic. Basic over verified TLS is as safe as a session: the password goes only to the BMC's own origin
(every path is the BMC's and redirects are refused, so it cannot reach another address or plain http), nobody
else reads it over verified TLS, the session's POST body carries the same password the same way, and a session
token is a bearer secret too (often for 30 min after a failed logout). Basic saves two sequential round trips
per host (login, logout): on BMCs that take seconds per request, most of a compliant check. A wrong password
costs a BMC as many failed attempts as reads sent at once (up to 4) instead of one; "session" keeps the old way.

Safety rules enforced here:

* TLS is verified: with the inventory's ``ca_bundle`` when given, else the default CA store. (The library
  itself would skip verification when no CA file is passed, so one is always passed.) ``insecure=True``
  turns verification off and records a loud warning in the client's ``warnings``.
* Retries (tenacity, exponential backoff, honouring ``Retry-After``; ``--bmc-retries``): GET/DELETE on connection
  errors, connect timeouts, 5xx and unparsable JSON; POST/PATCH only on 503 or a connect timeout, i.e. when the
  BMC cannot have acted on the request. A read timeout is not retried: a BMC silent that long is hung, and three
  more tries cost a hung BMC 54 s per host (issue 39 item 7). The library's own blind retry loop is disabled
  (max_retry=0). A transport failure is said in words with the option that changes it, never urllib3's text.
* The session token and password never leave this object: not in results, errors, or reports. Both (and
  the basic-auth header value) are registered with numaforge.secrets, so text a BMC echoes back is
  redacted wherever it is shown or written.
* Redirects are never followed (``NoRedirects``, numaforge.bios.exchange): a 3xx answer is an error naming its Location, so the
  session token and a PATCH body never travel to another origin or over plain http.
"""

from __future__ import annotations

import base64
import re
import threading
import warnings as _warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlparse

import redfish.messages
import requests
import tenacity
from redfish.rest.v1 import (
    HttpClient,
    InvalidCredentialsError,
    JsonDecodingError,
    RetriesExhaustedError,
    SessionCreationError,
)

from .. import budget, safeio, secrets
from .deadline import AnswerTooLarge, MiB, capped, cut_reason, quiet_library_logging
from .errors import (
    RedfishAuthError,
    RedfishError,
    RedfishHTTPError,
    RedfishPasswordChangeRequiredError,
    RedfishRedirectError,
    RedfishTLSError,
    http_error,
)
from .errors import connection_refused as _refused
from .errors import fix_for_status as _fix_for
from .errors import password_change_uri as _password_change_uri
from .errors import ssl_reason as _ssl_reason
from .exchange import REFUSED_LOCATION, NoRedirects, Response, RetryPolicy, default_ca_file, path_of

quiet_library_logging()  # the library logs whole response bodies: masked, and not printed (deadline.py)

IDEMPOTENT = {"GET", "HEAD", "DELETE"}
_POOL = re.compile(r"\w*(HTTPS?ConnectionPool|_HTTPS?Pool)\(host=[^)]*\):\s*")  # urllib3's pool in its texts
MAX_CA_BUNDLE_BYTES = 16 * 1024 * 1024
LOGOUT_SECONDS = 10.0  # one logout try's total deadline (it runs after Ctrl-C and --host-timeout too)
AUTH_MODES = ("auto", "session", "basic")


_INCOMPLETE = re.compile(r"IncompleteRead\((\d+) bytes read, (\d+) more expected\)")


def _incomplete(text: str) -> str:
    """ " (100 of 4137 bytes came)" from urllib3's IncompleteRead text, else ""."""
    m = _INCOMPLETE.search(text)
    return f" ({m.group(1)} of {int(m.group(1)) + int(m.group(2))} bytes came)" if m else ""


class _Transient(Exception):
    def __init__(self, what: str, retry_after: float | None = None):
        super().__init__(what)
        self.what = what
        self.retry_after = retry_after


class RedfishClient:
    """One authenticated conversation with one BMC. Use as a context manager: logout always happens."""

    def __init__(
        self,
        base_url: str,
        username: str,
        password: str,
        *,
        host: str = "",
        ca_file: str | None = None,
        insecure: bool = False,
        policy: RetryPolicy | None = None,
        auth: str = "session",
    ):
        self.host = host or base_url
        if auth not in AUTH_MODES:
            raise RedfishError(f"unknown authentication {auth!r}", self.host, f"use one of: {', '.join(AUTH_MODES)}")
        # "auto": HTTP Basic over verified TLS (no session round trips), a session otherwise (module docstring)
        self.auth = ("session" if insecure else "basic") if auth == "auto" else auth
        self._basic_may_fall_back = auth == "auto"  # a 401 to Basic: one session login instead (once)
        if secrets.url_has_credentials(base_url):
            raise RedfishError(
                "the BMC URL carries credentials (user:password@)",
                self.host,
                "remove them from bmc.url; use bmc.username and bmc.password (env:/file:)",
            )
        self.base_url = base_url.rstrip("/")
        self.policy = policy or RetryPolicy()
        self.insecure = insecure
        self.warnings: list[str] = []
        self.auth_method: str | None = None
        self.requests: list[tuple[str, str, int | None]] = []  # (method, path, status) -- no bodies, no headers
        self._lock = threading.Lock()
        self._username = username
        self._password = password
        secrets.register(password)
        if insecure:
            self.warnings.append(
                f"TLS verification is OFF for {self.base_url} (--insecure / bmc.insecure): "
                "the BMC's identity is not checked and the credentials can be intercepted"
            )
            cafile = None
            # said once, loudly, by the task and in every host's report; not once per request
            import urllib3

            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        else:
            cafile = ca_file or default_ca_file()
            if ca_file:  # OpenSSL reads it on the first request: a FIFO would block, /dev/zero would never end
                safeio.check_input(
                    ca_file,
                    what="CA bundle",
                    where=f"{self.host} (bmc.ca_bundle)",
                    error=RedfishError,
                    max_bytes=MAX_CA_BUNDLE_BYTES,
                    fix_kind="point bmc.ca_bundle at the PEM file of the CA that signed the BMC's certificate",
                    fix_size="point bmc.ca_bundle at a PEM CA file (a system bundle is ~200 KiB), not another file",
                )
        adapter = NoRedirects(total_timeout=self.policy.total_timeout)
        self._client = HttpClient(
            self.base_url,
            username=username,
            password=password,
            cafile=cafile,
            timeout=(self.policy.connect_timeout, self.policy.read_timeout),
            max_retry=0,
            check_connectivity=False,
            https_adapter=adapter,
        )
        if self.base_url.startswith("http://"):
            # the library mounts its https_adapter for https:// only; a plain-http BMC (insecure lab) gets the
            # same no-redirect adapter. The one place that touches the library's requests session directly.
            self._client._session.mount("http://", adapter)
        self.root: dict = {}
        self.known_login_url: str | None = None  # set by the caller from a per-run model cache
        self.on_close: list = []  # callbacks run by close()
        self.confirmed: set = set()  # ids of cached objects this BMC confirmed (bios.discovery)
        self.prefetched: dict[tuple[str, str], Response | RedfishError] = {}  # prefetch(): not yet asked for

    # -- lifecycle -----------------------------------------------------------------------------------
    def __enter__(self) -> "RedfishClient":
        try:
            self.login(self.known_login_url)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False

    def ensure_root(self) -> dict:
        """The service root, read on first use (a login through a known sessions URL skips it)."""
        if not self.root:
            self.root = self.get("/redfish/v1/").body
        return self.root

    @property
    def login_url(self) -> str:
        """The sessions collection: the one logged in to, else the one the service root names once read."""
        if self._client.login_url or not self.root:
            return self._client.login_url
        links = (self.root.get("Links") or {}).get("Sessions") or {}
        return path_of(links.get("@odata.id") or "/redfish/v1/SessionService/Sessions")

    def login(self, known_login_url: str | None = None) -> None:
        """Session login (basic as fallback). ``known_login_url``: the sessions collection another host of the
        same model answered with in this run; then the service root is not read until something needs it."""
        budget.check(f"logging in to {self.host}")
        if self.auth == "basic":
            return self._basic(known_login_url)
        if known_login_url:
            self._client.login_url = known_login_url
        else:
            self.ensure_root()
            links = (self.root.get("Links") or {}).get("Sessions") or {}
            self._client.login_url = path_of(links.get("@odata.id") or "/redfish/v1/SessionService/Sessions")
        self._client.root_resp = True  # the library must not read the service root on its own
        for attempt in range(self.policy.attempts):
            try:
                with _warnings.catch_warnings():
                    _warnings.simplefilter("ignore")
                    self._client.login(auth="session")
                if not self._client.get_session_key():  # a 2xx without X-Auth-Token: no session to send
                    self.requests.append(("POST", self._client.login_url, None))
                    raise RedfishError(
                        f"POST {self._client.login_url} (session login) was answered as a success but without an "
                        "X-Auth-Token header: the BMC issued no session token, so no request could be authenticated "
                        "(the credentials were accepted or not checked; nothing was read or written)",
                        f"{self.host} ({self.base_url})",
                        "check the BMC's session service (firmware, a proxy dropping headers); bmc.auth: basic sends "
                        "the credentials with each request instead of a session",
                    )
                self.auth_method = "session"
                secrets.register(self._client.get_session_key())
                self.requests.append(("POST", self._client.login_url, None))
                return
            except redfish.messages.RedfishPasswordChangeRequiredError as exc:
                # the session exists (close() logs it out) but the BMC allows nothing else until the password changes
                self.requests.append(("POST", self._client.login_url, 201))
                raise self._password_change(str(exc.args[1]) if len(exc.args) > 1 else "") from None
            except InvalidCredentialsError:
                self.requests.append(("POST", self._client.login_url, 401))
                if known_login_url:
                    # a BMC answers 401 for a sessions URL it does not have (unauthenticated request to an
                    # unknown path): ask its service root before calling the credentials wrong
                    return self.login(None)
                raise RedfishAuthError(
                    "the BMC refused the credentials",
                    f"{self.host} ({self.base_url})",
                    "check bmc.username and the password reference in the inventory",
                ) from None
            except SessionCreationError as exc:
                self.requests.append(("POST", self._client.login_url, None))
                if str(exc).startswith("HTTP 3"):
                    code = str(exc).split(":", 1)[0]
                    raise RedfishRedirectError(
                        f"POST {self._client.login_url} (session login) answered {code}, a "
                        "redirect; numaforge never follows redirects (credentials would go to "
                        "another address)",
                        f"{self.host} ({self.base_url})",
                        "set bmc.url to the address the BMC really serves Redfish on; if it "
                        "should not redirect, check for a man-in-the-middle",
                    ) from None
                if known_login_url and "HTTP 503" not in str(exc):
                    # the model's sessions URL (another host's, or a past run's) is not this BMC's
                    return self.login(None)
                if "HTTP 503" in str(exc) and attempt + 1 < self.policy.attempts:
                    import time

                    time.sleep(min(self.policy.backoff * 2**attempt, self.policy.max_wait))
                    continue
                break  # no session service: fall back to basic authentication
            except RetriesExhaustedError as exc:
                raise self._transport_error("POST", self._client.login_url, exc) from None
        self.warnings.append("session login failed; using HTTP basic authentication")
        try:
            with _warnings.catch_warnings():
                _warnings.simplefilter("ignore")
                self._client.login(auth="basic")
            secrets.register(self._client.get_authorization_key())
            self.requests.append(("GET", self._client.login_url, None))
        except InvalidCredentialsError:
            raise RedfishAuthError(
                "the BMC refused the credentials (basic authentication)",
                f"{self.host} ({self.base_url})",
                "check bmc.username and the password reference in the inventory",
            ) from None
        except RetriesExhaustedError as exc:
            raise self._transport_error("GET", self._client.login_url, exc) from None
        self.auth_method = "basic"

    def _basic(self, known_login_url: str | None) -> None:
        """HTTP Basic: the credentials go with each request (no request of its own; a 401 is a RedfishAuthError),
        only to the BMC's origin (redirects refused, every path the BMC's own: path_of); module docstring."""
        self._client.login_url = known_login_url or ""
        self._client.root_resp = True
        token = base64.b64encode(f"{self._username}:{self._password}".encode()).decode()
        self._client.set_authorization_key(f"Basic {token}")
        secrets.register(token)  # (the header value contains it: redacted too)
        self.auth_method = "basic"

    def close(self) -> None:
        """Log out (DELETE the session, retried: it is idempotent) and drop the connection. Never raises."""
        for callback in self.on_close:
            try:
                callback()
            except Exception:
                pass
        self.on_close = []
        if self._client.get_session_key():
            # even after Ctrl-C/SIGTERM or a used-up --host-timeout (an open session holds one of the BMC's few
            # session slots), but each try capped at LOGOUT_SECONDS, and one try only once the run was stopped
            attempts = 1 if budget.stop_requested() else self.policy.attempts
            with budget.lifted(), capped(LOGOUT_SECONDS):
                for attempt in range(attempts):
                    try:
                        self._client.logout()
                        self.requests.append(("DELETE", "<session>", None))
                        break
                    except Exception as exc:  # logout problems must not hide the real result
                        if attempt + 1 == attempts:
                            self.warnings.append(
                                f"logout failed: {type(exc).__name__}; the session will time out on the BMC"
                            )
        self._client.set_session_key(None)
        try:
            # without a session key the library's public logout() only closes its connection pool
            self._client.logout()
        except Exception:
            pass
        self._client.set_authorization_key(None)
        self._client.set_password(None)
        self._password = ""

    # -- requests --------------------------------------------------------------------------------------
    def _password_change(self, account_uri: str) -> RedfishPasswordChangeRequiredError:
        return RedfishPasswordChangeRequiredError(
            f"the BMC requires the password of account '{self._username}' to be changed before it allows any "
            f"request (Base.PasswordChangeRequired{', account ' + account_uri if account_uri else ''}); nothing "
            "was read or written on this host",
            f"{self.host} ({self.base_url})",
            "set a new password on the BMC (its web UI, or a PATCH of Password at "
            + (account_uri or "the account's URI")
            + "), update the secret bmc.password refers to, then re-run for this host",
        )

    def _cut_error(self, method: str, path: str) -> RedfishError | None:
        """The error for a request its deadline or a stop cut (None: it was not cut)."""
        reason = cut_reason()
        if reason is None:
            return None
        budget.check(f"the answer to {method} {path} on {self.host} (cut: the BMC had not finished answering)")
        if reason == "stop":  # a clean-up request (logout) after a stop: not worth more words
            return RedfishError(f"{method} {path} was cut: the run was stopped", f"{self.host} ({self.base_url})")
        return RedfishError(
            f"{method} {path} got no complete answer within its total deadline of "
            f"{self.policy.total_timeout:g} s (the BMC was still sending; each read got data, so the "
            f"{self.policy.read_timeout:g} s read timeout alone would wait forever)"
            + ("; the BMC may have carried the request out" if method not in IDEMPOTENT else ""),
            f"{self.host} ({self.base_url})",
            "the BMC or the network to it is failing: check its Redfish service (a BMC reset often helps); "
            "re-run (finished hosts are kept)",
        )

    def _too_large(self, method: str, path: str, big: AnswerTooLarge) -> RedfishError:
        size = f"announced {big.got} bytes" if big.declared else f"more than {big.cap} bytes had come"
        return RedfishError(
            f"{method} {path}: the BMC's answer is larger than the {big.cap // MiB} MiB cap for a {big.kind} "
            f"({size}); it was refused, nothing of it was used"
            + (" (the BMC may have carried the request out)" if method not in IDEMPOTENT else ""),
            f"{self.host} ({self.base_url})",
            "the BMC firmware or something on the network answers with far too much data: check the BMC "
            "(a BMC reset often helps), then re-run",
        )

    def _transport_error(self, method: str, path: str, exc: BaseException) -> RedfishError:
        cut = self._cut_error(method, path)
        if cut is not None:
            return cut
        cause = exc.__cause__ or exc
        if isinstance(cause, AnswerTooLarge):  # e.g. a login answered with far too much
            return self._too_large(method, path, cause)
        if isinstance(cause, requests.exceptions.SSLError):
            text = str(cause)
            if "hostname mismatch" in text.lower() or "doesn't match" in text or "not valid for" in text.lower():
                host = urlparse(self.base_url).hostname
                return RedfishTLSError(
                    f"TLS hostname mismatch: the BMC's certificate is not valid for '{host}' ({_ssl_reason(cause)})",
                    f"{self.host} ({self.base_url})",
                    "write in bmc.url the name (or IP) the certificate was issued for, or "
                    "re-issue the BMC certificate with this name in its subjectAltName; the "
                    "CA itself was trusted",
                )
            return RedfishTLSError(
                f"TLS certificate of the BMC could not be verified ({_ssl_reason(cause)})",
                f"{self.host} ({self.base_url})",
                "set bmc.ca_bundle in the inventory to the CA that signed the BMC certificate "
                "(or, only on a lab network, pass --insecure)",
            )
        if _refused(cause):
            return RedfishError(
                f"{method} {path} failed: connection refused by {urlparse(self.base_url).netloc}",
                f"{self.host} ({self.base_url})",
                "nothing listens there: check bmc.url's host and port and that the BMC's Redfish service is on",
            )
        if isinstance(cause, requests.exceptions.Timeout):
            return RedfishError(
                self._failed(method, path, cause)
                + ("; the BMC may have carried the request out" if method not in IDEMPOTENT else ""),
                f"{self.host} ({self.base_url})",
                "check the BMC is reachable and its Redfish service responsive (a BMC reset often helps); for a BMC "
                "that is slow but working, raise --bmc-read-timeout / --bmc-connect-timeout",
            )
        return RedfishError(
            f"{method} {path} failed: cannot reach the BMC ({self._cause_text(cause)})",
            f"{self.host} ({self.base_url})",
            "check bmc.url, the network path to the BMC and that its Redfish service is on",
        )

    def _failed(self, method: str, path: str, cause: BaseException | None) -> str:
        """ "GET /x timed out: ..." or "GET /x: the BMC closed the connection ..." (one line, in words)."""
        text = self._cause_text(cause)
        return f"{method} {path} {text}" if text.startswith("timed out") else f"{method} {path}: {text}"

    def _cause_text(self, cause: BaseException | None) -> str:
        """What went wrong on the wire, in words (never urllib3's pool repr and retry text)."""
        p = self.policy
        if isinstance(cause, requests.exceptions.ConnectTimeout):
            return f"timed out: no connection within the connect timeout of {p.connect_timeout:g} s (--bmc-connect-timeout)"
        if isinstance(cause, requests.exceptions.ReadTimeout):
            return (
                "timed out: the BMC took the connection but sent no answer within the timeout "
                f"({p.connect_timeout:g} s for the TLS handshake, --bmc-connect-timeout; {p.read_timeout:g} s "
                "for an answer, --bmc-read-timeout)"
            )
        text = str(cause or "")
        if "Connection broken" in text:  # headers came, then the connection ended before the body was whole
            return "the BMC cut the connection in the middle of its answer" + _incomplete(text)
        if "Connection reset" in text or "RemoteDisconnected" in text or "Connection aborted" in text:
            return "the BMC closed the connection without an answer"
        text = _POOL.sub("", text)
        return (text if len(text) < 200 else text[:200] + "...") or type(cause).__name__

    def _once(self, method: str, path: str, body: Any = None, headers: dict | None = None) -> Response:
        retryable_transport = method in IDEMPOTENT
        try:
            fn = getattr(self._client, method.lower())
            if method in ("GET", "DELETE", "HEAD"):
                raw = fn(path, headers=headers)
            else:
                raw = fn(path, body=body, headers=headers)
        except RetriesExhaustedError as exc:
            cause = exc.__cause__
            self.requests.append((method, path, None))
            if isinstance(cause, AnswerTooLarge):  # asking again gets the same answer
                raise self._too_large(method, path, cause) from None
            if isinstance(cause, requests.exceptions.SSLError) or _refused(cause) or cut_reason():
                # a certificate does not get better by asking again; a closed port is not a busy BMC
                raise self._transport_error(method, path, exc) from None
            if isinstance(cause, requests.exceptions.ReadTimeout):
                # silent for a whole read timeout: hung, not busy -- asking again would only multiply the wait
                raise self._transport_error(method, path, exc) from None
            if retryable_transport or isinstance(cause, requests.exceptions.ConnectTimeout):
                raise _Transient(self._failed(method, path, cause)) from exc
            raise self._transport_error(method, path, exc) from None
        status = raw.status
        self.requests.append((method, path, status))
        hdrs = {k.lower(): v for k, v in raw.getheaders()}
        if 300 <= status < 400:
            location = hdrs.get(REFUSED_LOCATION) or hdrs.get("location") or "(no Location header)"
            raise RedfishRedirectError(
                f"{method} {path} answered {status}, a redirect to {location}; numaforge never "
                "follows redirects (the session token"
                + (" and the request body" if body else "")
                + " would go there); nothing was sent to it",
                f"{self.host} ({self.base_url})",
                "set bmc.url to the address the BMC really serves Redfish on; if this BMC should "
                "not redirect, check the network for a man-in-the-middle",
            )
        if status == 503 or (status >= 500 and retryable_transport):
            ra = raw.retry_after
            raise _Transient(f"{method} {path}: HTTP {status}", float(ra) if ra is not None else None)
        try:
            parsed = raw.dict if raw.read else {}
        except JsonDecodingError:
            if retryable_transport:
                raise _Transient(f"{method} {path}: the BMC answered with invalid JSON") from None
            # an answer, if an unreadable one: the BMC got the request and acted on it (or not) -- typed by its
            # status, so a PATCH's caller re-reads what the BMC holds at once instead of waiting out a lost answer
            raise RedfishHTTPError(
                f"{method} {path}: the BMC answered with invalid JSON (HTTP {status})",
                f"{self.host} ({self.base_url})",
                "the BMC firmware misbehaves; check the request outcome on the BMC and re-run",
                status=status,
            ) from None
        resp = Response(status, parsed if isinstance(parsed, dict) else {"value": parsed}, hdrs, path)
        if status == 403:
            account = _password_change_uri(resp.body)
            if account is not None:  # a fault of this host's account, whatever was asked: no request can go on
                raise self._password_change(account)
        return resp

    def request(self, method: str, path: str, body: Any = None, headers: dict | None = None) -> Response:
        """One request with the retries that are safe for its method. Returns any HTTP status to the caller.
        With ``auth="auto"``, a BMC that refuses HTTP Basic gets one session login instead (some BMCs allow
        sessions only; the service root answers without credentials, so a refusal shows only on a later read),
        and the request is sent once more."""
        try:
            return self._request(method, path, body, headers)
        except RedfishAuthError:
            if not (self._basic_may_fall_back and self.auth_method == "basic"):
                raise
        self._basic_may_fall_back = False
        self.prefetched.clear()
        self._client.set_authorization_key(None)
        self.warnings.append("the BMC refused HTTP Basic; logged in with a session instead")
        self.auth = "session"
        self.login(self.known_login_url)
        return self._request(method, path, body, headers)

    def _request(self, method: str, path: str, body: Any = None, headers: dict | None = None) -> Response:
        path = path_of(path)
        if method in IDEMPOTENT and method != "DELETE":
            early = self.prefetched.pop((method, path.rstrip("/") or "/"), None)
            if isinstance(early, RedfishError):  # already asked (prefetch) and counted: its outcome, once
                raise early
            if early is not None:
                return self._checked(early)
        else:
            self.prefetched.clear()  # a write (or a logout) makes every earlier answer stale
        budget.check(f"{method} {path} on {self.host}")
        policy = self.policy

        def wait(state: tenacity.RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            base = min(policy.backoff * 2 ** (state.attempt_number - 1), policy.max_wait)
            if isinstance(exc, _Transient) and exc.retry_after is not None:
                base = min(max(exc.retry_after, 0.0), policy.max_wait)
            return budget.cap(base) or 0.0  # never past the host's budget: the next try's check ends it there

        try:
            for attempt in tenacity.Retrying(
                retry=tenacity.retry_if_exception_type(_Transient),
                stop=tenacity.stop_after_attempt(policy.attempts),
                wait=wait,
                reraise=True,
            ):
                with attempt:
                    tries = attempt.retry_state.attempt_number
                    if tries > 1:  # a used-up budget or a stop ends the host here, not after every retry
                        budget.check(f"{method} {path} on {self.host} (try {tries} of {policy.attempts})")
                    return self._checked(self._once(method, path, body, headers))
        except _Transient as exc:
            raise RedfishError(
                f"{exc.what} (gave up after {policy.attempts} attempts)",
                f"{self.host} ({self.base_url})",
                "the BMC is busy or failing; re-run later (finished hosts are kept), or allow more tries with "
                "--bmc-retries",
            ) from None
        raise AssertionError("unreachable")

    def _checked(self, r: Response) -> Response:
        if r.status == 401 and self.auth_method == "basic":
            raise RedfishAuthError(
                f"the BMC refused the credentials (HTTP Basic, {r.path})",
                f"{self.host} ({self.base_url})",
                "check bmc.username and the password reference in the inventory; if this BMC allows sessions "
                "only, set bmc.auth: session",
            )
        return r

    def prefetch(self, calls: list[tuple[str, str]]) -> None:
        """Send these reads (GET/HEAD, path) at once over the connection pool, one round trip for all; request()
        then answers each from here once (an error as raised) instead of asking again; a transient failure is
        asked again then, with retries."""
        calls = [(m, path_of(p)) for m, p in dict.fromkeys(calls) if m in ("GET", "HEAD")]
        if len(calls) < 2:
            return
        budget.check(f"{len(calls)} reads on {self.host}")
        snap = budget.snapshot()  # the reads are this host's work: its --host-timeout holds in the pool's threads

        def one(call: tuple[str, str]) -> None:
            key = (call[0], call[1].rstrip("/") or "/")  # DSP0266 makes /x and /x/ the same resource
            try:
                with budget.adopted(snap):
                    r = self._once(*call)
            except RedfishError as exc:  # answered (a redirect, a password to change) or failed for good
                self.prefetched[key] = exc
            except _Transient:
                pass
            else:
                if r.status < 500:
                    self.prefetched[key] = r

        with ThreadPoolExecutor(max_workers=len(calls), thread_name_prefix="redfish-read") as pool:
            list(pool.map(one, calls))

    def get(self, path: str) -> Response:
        r = self.request("GET", path)
        if r.status >= 400:
            raise http_error(
                r.status,
                f"GET {path_of(path)} answered {r.status}: {r.error_text()}",
                f"{self.host} ({self.base_url})",
                _fix_for(r.status),
            )
        return r

    def patch(self, path: str, body: dict, etag: str | None = None) -> Response:
        headers = {"If-Match": etag} if etag else None
        return self.request("PATCH", path, body=body, headers=headers)

    def post(self, path: str, body: dict) -> Response:
        return self.request("POST", path, body=body)

    def count(self, method: str | None = None) -> int:
        return sum(1 for m, _, _ in self.requests if method is None or m == method)
