#!/usr/bin/env python3
"""A small order service for idemproxy's integration test, written without
any idempotency support of its own.

Usage: orders_backend.py EXECUTIONS_FILE

It listens on a free loopback port and prints the port on its first line
of output. Every execution of POST /orders appends one line to
EXECUTIONS_FILE (which it owns): "<n> <Idempotency-Key or ->", written
before the order is answered, so the test counts executions, not answers.

Test hooks (request headers): X-Fail: 500 fails the order after counting
it; X-Delay: <seconds> sleeps before answering.
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"n": 0}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def answer(self, status, obj, extra=()):
        body = json.dumps(obj, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/healthz":
            self.answer(200, {"backend": "python"})
        else:
            self.answer(404, {"error": "not found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if not self.path.startswith("/orders"):
            self.answer(404, {"error": "not found"})
            return
        try:
            item = json.loads(raw or b"{}")
        except ValueError:
            self.answer(400, {"error": "invalid JSON"})
            return
        key = self.headers.get("Idempotency-Key") or "-"
        with LOCK:
            STATE["n"] += 1
            n = STATE["n"]
            with open(sys.argv[1], "a") as f:
                f.write("%d %s\n" % (n, key))
        delay = float(self.headers.get("X-Delay") or 0)
        if delay:
            time.sleep(delay)
        if self.headers.get("X-Fail") == "500":
            self.answer(500, {"error": "backend failure", "execution": n})
            return
        order = {"order": n, "item": item, "at": time.time()}
        self.answer(201, order, [("Location", "/orders/%d" % n), ("Set-Cookie", "seen=%d" % n)])


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
