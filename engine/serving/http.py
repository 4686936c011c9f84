"""Small HTTP helpers on the standard library (loopback servers and a JSON client), the
threaded server every role runs, and the constants the worker and the router share."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from typing import Any

MAX_JSON_BODY = 8 << 20
# How long a request may take to generate once its KV has landed (not a transfer bound).
GENERATION_TIMEOUT_S = 3600.0


class HTTPFailure(Exception):
    """A peer answered with an error status or could not be reached."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class BadRequest(Exception):
    """The client's request is malformed (answered with 400)."""


class JSONHandler(BaseHTTPRequestHandler):
    """Request handler base: JSON in, JSON out, quiet logs, HTTP/1.1 keep-alive."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request would drown the bench's progress output

    def read_body(self, limit: int = MAX_JSON_BODY) -> bytes:
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise BadRequest("a Content-Length header is required") from None
        if length < 0 or length > limit:
            raise BadRequest(f"body of {length} bytes is over the {limit}-byte limit")
        return self.rfile.read(length)

    def read_json(self) -> dict[str, Any]:
        try:
            body = json.loads(self.read_body())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise BadRequest(f"body is not valid JSON: {e}") from None
        if not isinstance(body, dict):
            raise BadRequest("body must be a JSON object")
        return body

    def send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def post(url: str, payload: dict[str, Any] | bytes, timeout: float,
         content_type: str = "application/json") -> dict[str, Any]:
    """POST and decode a JSON answer; any failure becomes :class:`HTTPFailure`."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": content_type})
    return _send(req, timeout)


def get(url: str, timeout: float) -> dict[str, Any]:
    return _send(urllib.request.Request(url, method="GET"), timeout)


def _send(req: urllib.request.Request, timeout: float) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        try:
            message = json.loads(e.read()).get("error", e.reason)
        except (ValueError, AttributeError):
            message = str(e.reason)
        raise HTTPFailure(e.code, str(message)) from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise HTTPFailure(0, f"{req.full_url}: {e}") from None


class EngineHTTPServer(ThreadingHTTPServer):
    """Thread per connection; a deep accept backlog (the default 5 resets connections
    when a router fans out dozens of concurrent requests)."""

    daemon_threads = True
    request_queue_size = 1024


def serve(handler: type[JSONHandler], port: int, host: str = "127.0.0.1") -> None:
    """Serve until interrupted; prints the bound address on stderr once listening."""
    import sys

    server = EngineHTTPServer((host, port), handler)
    print(f"engine: listening on http://{host}:{server.server_address[1]}", file=sys.stderr,
          flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
