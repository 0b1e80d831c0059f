"""A hostile HTTP(S) endpoint for the fault campaign: it records every request it receives (method, path,
headers, body) and answers 200 {}. It stands at the other end of a redirect (does the session token or a PATCH
body ever reach it?) and, with a certificate for another name, plays a BMC whose TLS name does not match.

A fake at a boundary on purpose: what is tested is what numaforge sends to a party that is not its BMC."""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class Recorder:
    def __init__(self, cert: Path | None = None, key: Path | None = None, host: str = "127.0.0.1"):
        self.requests: list[dict] = []
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                rec.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                     "body": body.decode(errors="replace")})
                data = b'{"@odata.id": "/redfish/v1/", "Links": {"Sessions": {"@odata.id": "/s"}}}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Auth-Token", "hostile-token")
                self.send_header("Location", "/s/1")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _any

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        if cert is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def text(self) -> str:
        return "\n".join(f"{r['method']} {r['path']} {r['headers']} {r['body']}" for r in self.requests)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
