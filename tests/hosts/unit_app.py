#!/usr/bin/env python3
"""The apps the systemd tests run inside the booted container, each logging what happens to it
as lines appended to /run/lc/MODE.log.

  notify   an sd_notify service: STATUS while it warms up (1.5 s), READY=1; WATCHDOG=1 every
           0.5 s when WATCHDOG_USEC is set; on HUP RELOADING=1, 1.5 s, READY=1; on TERM it
           drains for 1 s and exits 0. (It pings whatever WATCHDOG_PID says. systemd sets
           WATCHDOG_PID to the main process, lastcall, so libsystemd's sd_watchdog_enabled()
           in the app would say no: lastcall does not rewrite it as it does LISTEN_PID.)
  socket   socket activation: serves fd 3, answering with its pid and LISTEN_PID; on TERM it
           closes the listener, drains for 3 s, exits 0.
  daemon   double-forks a daemon into a session of its own, then runs; each exits 0 on TERM.
"""
import os
import signal
import socket
import sys
import time

MODE = sys.argv[1]
LOG = f"/run/lc/{MODE}.log"


def log(*words):
    os.makedirs("/run/lc", exist_ok=True)
    with open(LOG, "a") as f:
        f.write(" ".join(str(w) for w in words) + "\n")


def notify(message):
    address = os.environ.get("NOTIFY_SOCKET", "")
    if not address:
        log("no NOTIFY_SOCKET")
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(message.encode(), address)


def drain_then_exit(seconds, role="app"):
    def on_term(_signum, _frame):
        log(role, "term", os.getpid())
        time.sleep(seconds)
        log(role, "drained", os.getpid())
        os._exit(0)
    signal.signal(signal.SIGTERM, on_term)


def mode_notify():
    log("app started", os.getpid())
    notify("STATUS=warming up")
    time.sleep(1.5)
    notify("READY=1\nSTATUS=serving")
    log("app ready")

    def on_hup(_signum, _frame):
        log("app reloading")
        notify("RELOADING=1\nSTATUS=reloading")
        time.sleep(1.5)
        notify("READY=1\nSTATUS=serving again")
        log("app reloaded")
    signal.signal(signal.SIGHUP, on_hup)
    drain_then_exit(1)
    watchdog = "WATCHDOG_USEC" in os.environ
    while True:
        if watchdog:
            notify("WATCHDOG=1")
        time.sleep(0.5)


def mode_socket():
    listener = socket.socket(fileno=3)
    log("app started", os.getpid(), "LISTEN_PID", os.environ.get("LISTEN_PID"), "LISTEN_FDS", os.environ.get("LISTEN_FDS"))

    def on_term(_signum, _frame):
        listener.close()
        log("app closed its listener")
    signal.signal(signal.SIGTERM, on_term)
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            break
        with conn:
            conn.sendall(f"pid={os.getpid()} listen_pid={os.environ.get('LISTEN_PID')}\n".encode())
    time.sleep(3)
    log("app drained")
    sys.exit(0)


def mode_daemon():
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            drain_then_exit(0.5, "daemon")
            log("daemon started", os.getpid(), "ppid", os.getppid())
            while True:
                signal.pause()
        os._exit(0)
    os.waitpid(pid, 0)
    drain_then_exit(0.2, "app")
    log("app started", os.getpid())
    while True:
        signal.pause()


globals()["mode_" + MODE]()
