#!/usr/bin/env python3
"""The independent harness: a second, separately written measure of lastcall's start-up and
signal latency against the peer inits, to cross-check the Rust benchmark (benches/compare/).
It shares no code with it, so that no artefact of one harness decides a figure.

What it measures, and how:

- Start-up. Each round runs `fixture true` alone once and every contender as a wrapper
  (`INIT ARGS... fixture true`) once, in an order shuffled every round (fixed seed). Every
  process is started the same way: os.posix_spawn with an environment built for each spawn
  (the harness's own plus the contender's variables), stdin, stdout and stderr on /dev/null,
  then os.waitpid; perf_counter_ns brackets spawn and wait. Per contender: the median wall
  time, the median overhead (its median minus `true` alone's), and for lastcall's set-ups the
  ratio of that overhead to the best peer's, with a 95% bootstrap interval (round indices
  resampled, the same rounds for every contender; the best peer is picked again in every
  resample).
- Signal latency. Each init runs as PID 1 of a new PID namespace (`unshare --pid --fork
  --kill-child`) around `fixture record`, one at a time, in blocks whose order is shuffled.
  Once the fixture reports it is ready, the harness sends SIGUSR1 to the init, each time
  taking CLOCK_MONOTONIC just before kill(); the fixture writes its own CLOCK_MONOTONIC from
  its handler; the difference is the latency. Per contender: p50, p99, and the p50 ratio to
  the best peer.

Placement: before measuring, the harness moves itself into a new cgroup of its own (cgroup v2
if /sys/fs/cgroup is cgroup2, else the v1 cpu hierarchy), so every contender runs inside it as
containers and services do, rather than in the root cgroup where the kernel's autogroup puts
each session in a scheduling group of its own. It moves back and removes the cgroup at the end,
also on failure or a signal. `--cpu N` pins the harness, and so the contenders, to one core.
Each run records the kernel's sched_autogroup_enabled, the load average and the host's steal
beside the figures.

Output: a Markdown table on stdout; `--json FILE` writes every figure as JSON. Needs Python 3,
gcc with a static libc, and util-linux's unshare; run it as root (namespaces, cgroups, --user).
"""

import argparse
import datetime
import gc
import glob
import json
import math
import os
import platform
import random
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = [
    ("tini", "/usr/bin/tini", ["-s", "--"]),
    ("tini-static", "/usr/bin/tini-static", ["-s", "--"]),
    ("dumb-init", "/usr/bin/dumb-init", ["--"]),
    ("catatonit", "/usr/bin/catatonit", ["--"]),
]
# How long a contender may take to get ready, answer a signal or exit before the run fails: far
# above any real figure, only there so that a hung init cannot hang the harness.
DEADLINE_S = 10.0
BOOTSTRAP_RESAMPLES = 1000


class Failure(Exception):
    """A failure to report in one line."""


class Contender:
    def __init__(self, name, path, args, env=None, peer=False):
        self.name, self.path, self.args, self.env, self.peer = name, path, args, env or {}, peer


class Resources:
    """Everything the run creates, so that cleanup() leaves nothing behind whatever happened."""

    def __init__(self):
        self.tempdir = None
        self.notify = None
        self.live = set()  # pids spawned and not yet reaped
        self.cgroup = None  # (dir made, dir we came from, "+cpu" we enabled or None)

    def spawned(self, pid):
        self.live.add(pid)

    def reap(self, pid):
        _, status = os.waitpid(pid, 0)
        self.live.discard(pid)
        return os.waitstatus_to_exitcode(status)

    def cleanup(self):
        problems = []
        for pid in list(self.live):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # Reap every child, also one started just before a signal interrupted the harness.
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
        self.live.clear()
        if self.notify is not None:
            self.notify.close()
            self.notify = None
        if self.cgroup is not None:
            problems += leave_cgroup(*self.cgroup)
            self.cgroup = None
        if self.tempdir is not None:
            shutil.rmtree(self.tempdir, ignore_errors=True)
            if os.path.exists(self.tempdir):
                problems.append(f"could not remove {self.tempdir}")
            self.tempdir = None
        for p in problems:
            print(f"independent.py: {p}", file=sys.stderr)


# --- placement --------------------------------------------------------------------------------

def mountinfo():
    """(mount point, fstype, super options) of every mount."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            head, _, tail = line.partition(" - ")
            fields, rest = head.split(), tail.split()
            if len(fields) >= 5 and len(rest) >= 3:
                out.append((fields[4], rest[0], rest[2].split(",")))
    return out


def own_cgroups():
    """/proc/self/cgroup as {controllers: path}; v2's entry under the key ''."""
    out = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            out[controllers] = path
    return out


def enter_cgroup(res):
    """Moves the harness into a new cgroup of its own; returns (its dir, how it is set up)."""
    mounts = mountinfo()
    own = own_cgroups()
    name = f"independent-bench-{os.getpid()}"
    if any(point == "/sys/fs/cgroup" and fstype == "cgroup2" for point, fstype, _ in mounts):
        version, mount, path = 2, "/sys/fs/cgroup", own.get("", "/")
    else:
        found = [(point, opts) for point, fstype, opts in mounts if fstype == "cgroup" and "cpu" in opts]
        if not found:
            raise Failure("no cgroup2 at /sys/fs/cgroup and no cgroup v1 cpu hierarchy mounted")
        mount = found[0][0]
        path = next((p for c, p in own.items() if "cpu" in c.split(",")), None)
        if path is None:
            raise Failure("/proc/self/cgroup names no cpu cgroup")
        version = 1
    parent = os.path.join(mount, path.lstrip("/"))
    note = f"cgroup v{version}"
    enabled = None
    if version == 2:
        with open(os.path.join(parent, "cgroup.subtree_control")) as f:
            active = f.read().split()
        if "cpu" not in active:
            try:
                with open(os.path.join(parent, "cgroup.subtree_control"), "w") as f:
                    f.write("+cpu")
                enabled = parent
            except OSError as e:
                # A non-root cgroup with processes in it cannot hand controllers down.
                note += f", without the cpu controller (+cpu in {parent}: {e.strerror})"
    made = os.path.join(parent, name)
    os.mkdir(made)
    res.cgroup = (made, parent, enabled)
    with open(os.path.join(made, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))
    return made, note


def leave_cgroup(made, parent, enabled):
    problems = []
    try:
        with open(os.path.join(parent, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    except OSError as e:
        problems.append(f"could not move back to {parent}: {e.strerror}")
    # Whatever is still inside is ours (a namespace being torn down): kill it, then remove.
    for _ in range(500):
        try:
            os.rmdir(made)
            break
        except FileNotFoundError:
            break
        except OSError:
            try:
                with open(os.path.join(made, "cgroup.procs")) as f:
                    for pid in f.read().split():
                        try:
                            os.kill(int(pid), signal.SIGKILL)
                        except ProcessLookupError:
                            pass
            except OSError:
                pass
            time.sleep(0.01)
    else:
        problems.append(f"could not remove the cgroup {made}")
    if enabled is not None:
        try:
            with open(os.path.join(enabled, "cgroup.subtree_control"), "w") as f:
                f.write("-cpu")
        except OSError as e:
            problems.append(f"could not take the cpu controller back off {enabled}: {e.strerror}")
    return problems


# --- host records -----------------------------------------------------------------------------

def cpu_ticks():
    """(steal, total) from the cpu line of /proc/stat (guest time is already in user time)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu "):
                v = [int(x) for x in line.split()[1:]]
                return v[7], sum(v[:8])
    raise Failure("/proc/stat has no cpu line")


class Section:
    """The load average and the host's steal over one section."""

    def __init__(self):
        self.load_before = list(os.getloadavg())
        self.ticks_before = cpu_ticks()

    def close(self):
        steal, total = (b - a for a, b in zip(self.ticks_before, cpu_ticks()))
        return {
            "loadavg_before": self.load_before,
            "loadavg_after": list(os.getloadavg()),
            "steal_ticks": steal,
            "total_ticks": total,
            "steal_pct": 100.0 * steal / total if total > 0 else 0.0,
        }


def read_text(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as e:
        return f"unreadable ({e.strerror})"


# --- spawning ---------------------------------------------------------------------------------

class Spawner:
    """Starts every process the same way, so the harness does identical work for each."""

    def __init__(self, base_env, devnull):
        self.base_env = base_env
        self.devnull = devnull
        # Python ignores SIGPIPE and SIGXFSZ, and ignored signals survive exec.
        self.sigdef = {s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)}

    def env_for(self, contender):
        env = dict(self.base_env)
        if contender is not None:
            env.update(contender.env)
        return env

    def spawn(self, res, argv, env, stdout=None, stderr=None):
        actions = [
            (os.POSIX_SPAWN_DUP2, self.devnull, 0),
            (os.POSIX_SPAWN_DUP2, self.devnull if stdout is None else stdout, 1),
            (os.POSIX_SPAWN_DUP2, self.devnull if stderr is None else stderr, 2),
        ]
        pid = os.posix_spawn(argv[0], argv, env, file_actions=actions, setsigmask=(), setsigdef=self.sigdef)
        res.spawned(pid)
        return pid


def drain(sock):
    """Empties the notify socket between runs, so that its buffer never fills."""
    if sock is None:
        return
    while True:
        try:
            sock.recv(4096)
        except BlockingIOError:
            return


# --- statistics -------------------------------------------------------------------------------

def percentile(sorted_values, p):
    """Nearest rank."""
    k = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return sorted_values[k - 1]


def startup_figures(times, contenders, seed):
    """times: {name: [ns per round]}, 'true' included."""
    rounds = len(times["true"])
    med = {name: statistics.median(v) for name, v in times.items()}
    peers = [c.name for c in contenders if c.peer]
    out = {"true": {"median_us": med["true"] / 1000.0}}

    def ratios(indices):
        m = {name: statistics.median([times[name][i] for i in indices]) for name in times}
        best = min((m[p] - m["true"] for p in peers), default=None)
        if best is None or best <= 0:
            return {}
        return {c.name: (m[c.name] - m["true"]) / best for c in contenders if not c.peer}

    point = ratios(range(rounds))
    rng = random.Random(seed)
    samples = {c.name: [] for c in contenders if not c.peer}
    for _ in range(BOOTSTRAP_RESAMPLES):
        r = ratios([rng.randrange(rounds) for _ in range(rounds)])
        for name, v in r.items():
            samples[name].append(v)
    for c in contenders:
        row = {"peer": c.peer, "median_us": med[c.name] / 1000.0, "overhead_us": (med[c.name] - med["true"]) / 1000.0}
        if not c.peer:
            row["ratio"] = point.get(c.name)
            s = sorted(samples[c.name])
            # A resample in which no peer has a positive overhead has no ratio; too few, none.
            if len(s) >= BOOTSTRAP_RESAMPLES // 2:
                row["ratio_ci95"] = [percentile(s, 2.5), percentile(s, 97.5)]
            else:
                row["ratio_ci95"] = None
        out[c.name] = row
    return out


# --- sections ---------------------------------------------------------------------------------

def run_startup(res, spawner, contenders, fixture, rounds, seed):
    rng = random.Random(seed)
    entries = [None] + contenders  # None: fixture true alone
    times = {"true": []}
    times.update({c.name: [] for c in contenders})
    for _ in range(rounds):
        order = entries[:]
        rng.shuffle(order)
        for c in order:
            argv = [fixture, "true"] if c is None else [c.path] + c.args + [fixture, "true"]
            env = spawner.env_for(c)
            start = time.perf_counter_ns()
            pid = spawner.spawn(res, argv, env)
            code = res.reap(pid)
            elapsed = time.perf_counter_ns() - start
            name = "true" if c is None else c.name
            if code != 0:
                raise Failure(f"start-up: {name} exited with {code}: {' '.join(argv)}")
            times[name].append(elapsed)
            drain(res.notify)
    return times


def read_exactly(fd, n, what):
    """n bytes from the pipe, or a Failure after DEADLINE_S or at end of file."""
    data = b""
    deadline = time.monotonic() + DEADLINE_S
    while len(data) < n:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise Failure(f"{what}: nothing after {DEADLINE_S:.0f} s")
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise Failure(f"{what}: the fixture's output ended")
        data += chunk
    return data


def child_of(pid):
    """The one child of pid (unshare's: the namespace's PID 1)."""
    kids = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            with open(path) as f:
                kids += [int(k) for k in f.read().split()]
        except OSError:
            pass
    if not kids:
        # Kernels without /proc/PID/task/TID/children: the parent pid of every process.
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                with open(stat) as f:
                    text = f.read()
                if int(text.rpartition(")")[2].split()[1]) == pid:
                    kids.append(int(stat.split("/")[2]))
            except (OSError, ValueError, IndexError):
                pass
    if len(kids) != 1:
        raise Failure(f"unshare {pid} has {len(kids)} children, not one")
    return kids[0]


def latency_block(res, spawner, c, fixture, signals, errlog):
    """Starts c as PID 1 of a new PID namespace, sends it `signals` SIGUSR1s, stops it."""
    unshare = shutil.which("unshare") or "/usr/bin/unshare"
    argv = [unshare, "--pid", "--fork", "--kill-child"]
    if os.geteuid() != 0:
        argv.append("--map-root-user")
    argv += ["--", c.path] + c.args + [fixture, "record"]
    env = spawner.env_for(c)
    rfd, wfd = os.pipe()
    err = os.open(errlog, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    pid = None
    try:
        pid = spawner.spawn(res, argv, env, stdout=wfd, stderr=err)
        os.close(wfd)
        wfd = None
        if read_exactly(rfd, 1, f"{c.name}: readiness") != b"r":
            raise Failure(f"{c.name}: the fixture did not report ready")
        init = child_of(pid)
        out = []
        for _ in range(signals):
            sent = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            os.kill(init, signal.SIGUSR1)
            got = int.from_bytes(read_exactly(rfd, 8, f"{c.name}: SIGUSR1"), sys.byteorder)
            if got <= sent:
                raise Failure(f"{c.name}: the fixture's time {got} is not after the signal's {sent}")
            out.append(got - sent)
        os.kill(init, signal.SIGTERM)
        if read_exactly(rfd, 8, f"{c.name}: SIGTERM") != bytes(8):
            raise Failure(f"{c.name}: the fixture did not stop on SIGTERM")
        # End of file: the fixture, the init and unshare have all let go of the pipe.
        deadline = time.monotonic() + DEADLINE_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([rfd], [], [], left)[0]:
                raise Failure(f"{c.name}: did not exit within {DEADLINE_S:.0f} s of SIGTERM")
            if not os.read(rfd, 64):
                break
        code = res.reap(pid)
        pid = None
        if code != 0:
            raise Failure(f"{c.name}: exited with {code} after SIGTERM")
        return out
    except Failure as e:
        with open(errlog, errors="replace") as f:
            said = " | ".join(f.read().split("\n")[:3]).strip()
        raise Failure(f"latency: {e}" + (f" (stderr: {said})" if said else "")) from None
    finally:
        if pid is not None and pid in res.live:
            try:
                os.kill(pid, signal.SIGKILL)  # --kill-child takes the namespace with it
            except ProcessLookupError:
                pass
            res.reap(pid)
        os.close(rfd)
        os.close(err)
        if wfd is not None:
            os.close(wfd)


def run_latency(res, spawner, contenders, fixture, signals, seed):
    rng = random.Random(seed + 1)
    # A few blocks per contender, their order shuffled, so that a slow spell of the host falls
    # on every contender alike; each block restarts the init.
    blocks = max(1, min(10, signals // 20))
    sizes = [signals // blocks + (1 if i < signals % blocks else 0) for i in range(blocks)]
    lat = {c.name: [] for c in contenders}
    errlog = os.path.join(res.tempdir, "stderr")
    for size in sizes:
        order = contenders[:]
        rng.shuffle(order)
        for c in order:
            lat[c.name] += latency_block(res, spawner, c, fixture, size, errlog)
            drain(res.notify)
    return lat


def latency_figures(lat, contenders):
    out = {}
    for c in contenders:
        s = sorted(lat[c.name])
        out[c.name] = {"peer": c.peer, "p50_us": percentile(s, 50) / 1000.0, "p99_us": percentile(s, 99) / 1000.0}
    best = min((out[c.name]["p50_us"] for c in contenders if c.peer), default=None)
    for c in contenders:
        out[c.name]["ratio"] = out[c.name]["p50_us"] / best if best else None
    return out


# --- output -----------------------------------------------------------------------------------

def fmt(v, digits=1):
    return "–" if v is None else f"{v:.{digits}f}"


def table(contenders, startup, latency):
    head = ["contender"]
    if startup:
        head += ["start-up median (µs)", "overhead (µs)", "overhead / best peer (95% CI)"]
    if latency:
        head += ["latency p50 (µs)", "p99 (µs)", "p50 / best peer"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    names = (["true"] if startup else []) + [c.name for c in contenders]
    for name in names:
        row = [name if name != "true" else "`fixture true` alone"]
        if startup:
            s = startup[name]
            if name == "true":
                row += [fmt(s["median_us"]), "", ""]
            else:
                ratio = ""
                if "ratio" in s:
                    ci = s["ratio_ci95"]
                    ratio = fmt(s["ratio"], 2) + (f" ({ci[0]:.2f}–{ci[1]:.2f})" if ci else "")
                row += [fmt(s["median_us"]), fmt(s["overhead_us"]), ratio]
        if latency:
            if name == "true":
                row += ["", "", ""]
            else:
                s = latency[name]
                row += [fmt(s["p50_us"], 2), fmt(s["p99_us"], 2), fmt(s["ratio"], 2)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


# --- main -------------------------------------------------------------------------------------

def find_lastcall(given):
    if given:
        if not os.path.isfile(given):
            raise Failure(f"--lastcall: {given} does not exist")
        return os.path.abspath(given)
    for rel in ("target/x86_64-unknown-linux-musl/release/lastcall", "target/release/lastcall"):
        path = os.path.join(REPO, rel)
        if os.path.isfile(path):
            return path
    raise Failure("no release lastcall in target/: run `cargo build --release` or pass --lastcall PATH")


def contenders_for(lastcall, notify_path, skipped):
    port_sock = socket.socket()
    port_sock.bind(("127.0.0.1", 0))
    port = port_sock.getsockname()[1]
    port_sock.close()
    out = [
        Contender("lastcall", lastcall, ["--"]),
        # As the benchmark runs it: lastcall puts its private notify directory where it would in
        # a container (RUNTIME_DIRECTORY unset: /run, else /dev/shm), and removes it on exit.
        Contender("lastcall NOTIFY_SOCKET", lastcall, ["--"], {"NOTIFY_SOCKET": notify_path}),
        Contender("lastcall --setsid", lastcall, ["--setsid", "--"]),
        Contender("lastcall -c", lastcall, ["-c", "--"]),
        Contender("lastcall --health-listen", lastcall, ["--health-listen", f"127.0.0.1:{port}", "--"]),
    ]
    if os.geteuid() == 0:
        out.append(Contender("lastcall --user", lastcall, ["--user", "nobody", "--"]))
    else:
        skipped.append("lastcall --user (needs root)")
    for name, path, args in PEERS:
        if os.access(path, os.X_OK):
            out.append(Contender(name, path, args, peer=True))
        else:
            skipped.append(f"{name} ({path} is not installed)")
    return out


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lastcall", help="the lastcall binary (default: the release build in target/)")
    p.add_argument("--rounds", type=int, default=500, help="start-up rounds (default 500)")
    p.add_argument("--signals", type=int, default=2000, help="signals per contender (default 2000)")
    p.add_argument("--only", default="startup,latency", help="sections to run: startup, latency or both")
    p.add_argument("--seed", type=int, default=1, help="seed of the shuffles and the bootstrap")
    p.add_argument("--cpu", type=int, help="pin the harness and the contenders to this core")
    p.add_argument("--json", help="also write every figure to this file as JSON")
    a = p.parse_args()
    sections = {s.strip() for s in a.only.split(",") if s.strip()}
    if not sections or not sections <= {"startup", "latency"}:
        p.error("--only: a comma-separated list of startup, latency")
    if a.rounds < 1:
        p.error("--rounds: at least 1")
    if a.signals < 1:
        p.error("--signals: at least 1")
    a.sections = sections
    return a


def on_signal(sig, _frame):
    raise KeyboardInterrupt(f"stopped by signal {sig}")


def main():
    args = parse_args()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    res = Resources()
    devnull = None
    try:
        lastcall = find_lastcall(args.lastcall)
        res.tempdir = tempfile.mkdtemp(prefix="independent-bench-")
        # The --user set-up's app runs as nobody, which must reach the fixture inside.
        os.chmod(res.tempdir, 0o711)
        fixture = os.path.join(res.tempdir, "fixture")
        built = subprocess.run(
            ["gcc", "-O2", "-static", "-o", fixture, os.path.join(REPO, "benches", "fixture.c")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if built.returncode != 0:
            raise Failure("gcc -O2 -static benches/fixture.c failed (needs gcc and a static libc): "
                          + " | ".join(built.stderr.strip().split("\n")[:2]))
        notify_path = os.path.join(res.tempdir, "notify.sock")
        res.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        res.notify.bind(notify_path)
        res.notify.setblocking(False)
        skipped = []
        contenders = contenders_for(lastcall, notify_path, skipped)

        if args.cpu is not None:
            os.sched_setaffinity(0, {args.cpu})
        try:
            cgroup, cgroup_note = enter_cgroup(res)
        except (OSError, Failure) as e:
            cgroup, cgroup_note = None, f"none: could not make one ({e}); running where the harness is"

        record = {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "kernel": platform.release(),
            "cores": os.cpu_count(),
            "pinned_cpu": args.cpu,
            "sched_autogroup_enabled": read_text("/proc/sys/kernel/sched_autogroup_enabled"),
            "cgroup": cgroup,
            "cgroup_note": cgroup_note,
            "tempdir": res.tempdir,
            "lastcall": lastcall,
            "seed": args.seed,
            "skipped": skipped,
            "contenders": [{"name": c.name, "peer": c.peer, "argv": [c.path] + c.args, "env": c.env} for c in contenders],
            "sections": {},
        }
        base_env = dict(os.environ)
        base_env.pop("NOTIFY_SOCKET", None)
        devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        spawner = Spawner(base_env, devnull)
        startup = latency = None
        gc.disable()  # no collection in the middle of one contender's figure
        if "startup" in args.sections:
            section = Section()
            times = run_startup(res, spawner, contenders, fixture, args.rounds, args.seed)
            record["sections"]["startup"] = section.close()
            startup = startup_figures(times, contenders, args.seed)
            record["sections"]["startup"].update({"rounds": args.rounds, "figures": startup})
        if "latency" in args.sections:
            section = Section()
            lat = run_latency(res, spawner, contenders, fixture, args.signals, args.seed)
            record["sections"]["latency"] = section.close()
            latency = latency_figures(lat, contenders)
            record["sections"]["latency"].update({"signals": args.signals, "figures": latency})
        gc.enable()

        print(f"date: {record['date']}")
        print(f"kernel: {record['kernel']}, {record['cores']} cores"
              + (f", pinned to core {args.cpu}" if args.cpu is not None else ", not pinned"))
        print(f"sched_autogroup_enabled: {record['sched_autogroup_enabled']}")
        print(f"cgroup: {cgroup or '-'} ({cgroup_note})")
        print(f"lastcall: {lastcall}")
        for name in skipped:
            print(f"skipped: {name}")
        for key, what in (("startup", f"start-up, {args.rounds} rounds"), ("latency", f"latency, {args.signals} signals each")):
            s = record["sections"].get(key)
            if s:
                print(f"{what}: load {s['loadavg_before'][0]:.2f} before, {s['loadavg_after'][0]:.2f} after; "
                      f"steal {s['steal_ticks']} of {s['total_ticks']} ticks ({s['steal_pct']:.2f} %)")
        print()
        print(table(contenders, startup, latency))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(record, f, indent=2)
                f.write("\n")
        return 0
    except Failure as e:
        print(f"independent.py: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        print(f"independent.py: {e or 'interrupted'}; cleaned up", file=sys.stderr)
        return 130
    finally:
        # A second signal must not cut the cleanup short.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if devnull is not None:
            os.close(devnull)
        res.cleanup()


if __name__ == "__main__":
    sys.exit(main())
