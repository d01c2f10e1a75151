"""A pytest plugin for dumb-init's suite (loaded with -p): each test starts in an empty namespace.

The suite runs in a PID namespace of its own (tests/peer_suites.rs). A test that fails on a slow
moment can leave its processes running: child_processes_test's `yes | tail` pipelines burn both
cores of a 2-core machine, and every later test then times out or counts a stranger among its
pids. After each test's own teardown, once its verdict is in, this ends every process in the
namespace but PID 1 and pytest, and reaps pytest's own. It changes no test and no verdict; it
keeps one test's leftovers out of the next one's. Each ending is printed.

It acts only when ISOLATE_PEER_SUITE=1 and pytest is PID 1's child, as in that namespace.
"""
import os
import signal
import sys
import time

import pytest


def _in_the_suites_namespace():
    return os.environ.get("ISOLATE_PEER_SUITE") == "1" and os.getppid() == 1


def _leftovers():
    me = os.getpid()
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in (1, me):
            pids.append(int(entry))
    return pids


def _alive(pid):
    """Running, not a zombie waiting for PID 1 to reap it."""
    try:
        with open("/proc/{0}/stat".format(pid)) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _reap_own_children():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    if not _in_the_suites_namespace():
        return
    ended = set()
    # Again while any is left: one may have forked between the listing and its SIGKILL.
    for _ in range(10):
        left = [pid for pid in _leftovers() if _alive(pid)]
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        ended.update(left)
        # SIGKILL is not instant for a process in a system call: wait, bounded, until each is
        # gone or a zombie, so that the next test does not start among them.
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in left) and time.monotonic() < deadline:
            _reap_own_children()
            time.sleep(0.01)
    _reap_own_children()
    if ended:
        sys.__stderr__.write(
            "isolation: ended {0} process(es) left by {1}\n".format(len(ended), item.nodeid)
        )
        sys.__stderr__.flush()
