"""Small HTTP helpers on the standard library (loopback servers and a JSON client)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler
from typing import Any

MAX_JSON_BODY = 8 << 20


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
