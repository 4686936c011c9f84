"""Small HTTP helpers on the standard library (loopback servers and a JSON client), the
threaded server every role runs, and the constants the worker and the router share."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

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

    def start_events(self) -> None:
        """Begin a server-sent-events answer (chunked, so keep-alive still works)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def send_event(self, payload: dict[str, Any] | str) -> None:
        """One ``data:`` event (a JSON object, or a literal such as ``[DONE]``)."""
        text = payload if isinstance(payload, str) else json.dumps(payload)
        self.send_chunk(f"data: {text}\n\n".encode())

    def send_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_events(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

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


def error_message(raw: bytes, fallback: str) -> str:
    """The message of an error answer: ``{"error": "..."}`` or OpenAI's
    ``{"error": {"message": "..."}}``."""
    try:
        error = json.loads(raw).get("error", fallback)
    except (ValueError, AttributeError):
        return fallback
    if isinstance(error, dict):
        error = error.get("message", fallback)
    return str(error)


def _send(req: urllib.request.Request, timeout: float) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raise HTTPFailure(e.code, error_message(e.read(), str(e.reason))) from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise HTTPFailure(0, f"{req.full_url}: {e}") from None


def stream_post(url: str, payload: dict[str, Any], timeout: float) -> Iterator[bytes]:
    """POST JSON and yield the answer's server-sent events, one ``data:`` payload each
    (``b"[DONE]"`` included); a non-200 answer becomes :class:`HTTPFailure` before any."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
    try:
        try:
            conn.request("POST", parts.path or "/", body=json.dumps(payload).encode(),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
        except OSError as e:
            raise HTTPFailure(0, f"{url}: {e}") from None
        if resp.status != 200:
            raise HTTPFailure(resp.status, error_message(resp.read(), resp.reason))
        for line in resp:
            if line.startswith(b"data:"):
                yield line[5:].strip()
    except (OSError, http.client.HTTPException) as e:
        raise HTTPFailure(0, f"{url}: stream broken: {e}") from None
    finally:
        conn.close()


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
