#!/usr/bin/env python3
"""A tiny HTTP app that takes a while per request: the app of the 502 experiment.

  PORT=8080 DELAY=1 DRAIN=1 python3 slow_app.py      (HOST=0.0.0.0 to listen beyond loopback)

Every request sleeps DELAY seconds and logs START/FINISH with the in-flight count. With DRAIN=1
it handles SIGTERM (and Ctrl-C's SIGINT) the graceful way: stop accepting, finish what is in
flight, exit 0. Without it, either signal kills it mid-request (the default action, no
traceback), which is what most apps do.

Each log line carries the time on lastcall's clock, written as lastcall writes its own
(`app: +1.234s ...`), so the two interleave in order: lastcall hands the app its clock's zero
(LASTCALL_CLOCK_ZERO_NS, CLOCK_MONOTONIC in nanoseconds, which time.monotonic_ns() reads) with its
budget (LASTCALL_PRE_STOP_MS, LASTCALL_GRACE_MS). Run without lastcall, the app counts from its
own start.
"""
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DELAY = float(os.environ.get("DELAY", "1"))
try:
    ZERO_NS = int(os.environ["LASTCALL_CLOCK_ZERO_NS"])
except (KeyError, ValueError):
    ZERO_NS = time.monotonic_ns()
lock = threading.Lock()
active = 0


def log(msg):
    sys.stderr.write(f"app: +{(time.monotonic_ns() - ZERO_NS) / 1e9:.3f}s {msg}\n")
    sys.stderr.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_GET(self):
        global active
        req = self.headers.get("X-Req", self.path)
        with lock:
            active += 1
            log(f"START  req={req} active={active}")
        started = time.monotonic()
        try:
            time.sleep(DELAY)
            body = f"ok req={req} pid={os.getpid()}\n".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        finally:
            # Also when the client has gone (a broken pipe): the drain waits for this count.
            with lock:
                active -= 1
                log(f"FINISH req={req} elapsed={time.monotonic() - started:.2f}s active={active}")

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def handle_error(self, request, client_address):
        # One line, not a traceback: a client that hung up (curl -m) is not the app's failure.
        log(f"request from {client_address[0]}:{client_address[1]} failed: {sys.exc_info()[1]!r}")


def main():
    server = Server((os.environ.get("HOST", "127.0.0.1"), int(os.environ.get("PORT", "8080"))), Handler)
    if os.environ.get("DRAIN") == "1":
        def on_term(signum, _frame):
            log(f"signal {signum} received: stop accepting, drain in-flight")
            threading.Thread(target=server.shutdown, daemon=True).start()
        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)
    else:
        # Die of SIGINT as a C program would, rather than with Python's KeyboardInterrupt.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    log(f"listening on {server.server_address[1]} drain={os.environ.get('DRAIN') == '1'}")
    server.serve_forever()
    # serve_forever has returned: close the listener so new connections are refused, not queued.
    server.socket.close()
    log("accept loop stopped; waiting for in-flight requests")
    while True:
        with lock:
            if active == 0:
                break
        time.sleep(0.02)
    log("all in-flight done; exiting cleanly")
    sys.exit(0)


if __name__ == "__main__":
    main()
