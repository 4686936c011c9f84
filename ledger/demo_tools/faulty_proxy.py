"""A faulty HTTP proxy for the demo: it forwards to an upstream, until a request grows.

    python faulty_proxy.py --port 30050 --upstream http://127.0.0.1:30000 [--max-body 160]

Requests whose body is larger than ``--max-body`` bytes are read and then dropped: the
connection is closed with no answer, as a proxy with a too-small buffer does.  A
multi-turn conversation resends its whole context every round, so it works for a few
rounds and then "hangs up" — the seed incident's symptom, caused outside the engine.
Standard library only.
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer


def handler(upstream: str, max_body: int) -> type[BaseHTTPRequestHandler]:
    class Proxy(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args) -> None:
            pass

        def _forward(self, body: bytes | None) -> None:
            req = urllib.request.Request(upstream.rstrip("/") + self.path, data=body,
                                         method=self.command,
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=120) as resp:
                    status, data = resp.status, resp.read()
            except urllib.error.HTTPError as e:
                status, data = e.code, e.read()
            except OSError as e:
                status, data = 502, f'{{"error": "upstream: {type(e).__name__}"}}'.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._forward(None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if length > max_body:
                self.close_connection = True
                self.connection.close()  # the bug: no answer at all
                return
            self._forward(body)

    return Proxy


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--max-body", type=int, default=160)
    args = ap.parse_args(argv)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(args.upstream, args.max_body))
    print(f"faulty proxy on 127.0.0.1:{args.port} -> {args.upstream}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
