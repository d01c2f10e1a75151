# tests/differential.rs: runs ONE scenario under one init and writes what it observed to
# RUN/outcome. Usage: driver.py SCENARIO.json RUN. The test starts it as PID 1 of a PID
# namespace of its own (unshare --kill-child, under timeout), so that when it ends, everything
# it started ends too; orphans come back to it.
#
# Sequence: start the init (its mask, ignored signals, session, extra fd as drawn; as PID 1 of a
# nested namespace or not) around tests/differential/app.py; wait for every process of the app's
# tree to be ready; send each drawn signal to the init followed by a fence (SIGRTMIN+5, which
# every init forwards), and wait for the main child to take the fence (or to be gone, or the
# init to end), so that each signal is seen before the next is sent and the order is the init's
# (an init or app that stopped on it, as dumb-init does on TSTP, is woken with CONT to the init);
# ask every other process of the tree for a mark (SIGRTMIN+6, sent directly, delivered after
# every standard signal already pending); tell the main child to end (SIGRTMIN+7); wait for the
# init's end; mark the leftovers again and record them. Each signal is followed by the marks
# too, so that every process has taken what the init sent it before the next is sent.
import json, os, shlex, signal, subprocess, sys, time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures"))
from proc_tree import children, descendants, state_letter  # noqa: E402

scenario = json.load(open(sys.argv[1]))
run = os.path.abspath(sys.argv[2])
LIMIT = float(os.environ.get("DIFFERENTIAL_LIMIT", "20"))
FENCE, MARK, FIN = signal.SIGRTMIN + 5, signal.SIGRTMIN + 6, signal.SIGRTMIN + 7
APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "app.py")
log = os.path.join(run, "log")
open(log, "w").close()
notes = []
pid1 = scenario["pid1"]
tree = scenario["tree"]

app = [log, tree, scenario["on_term"], scenario["ending"][0], str(scenario["ending"][1])]


def script(name, first_line, mode):
    """A script in the run's directory that runs the app, with `first_line` above the exec."""
    path = os.path.join(run, name)
    with open(path, "w") as f:
        f.write(f'{first_line}exec python3 -S {shlex.quote(APP)} "$@"\n')
    os.chmod(path, mode)
    return [path] + app


if scenario["command"] == "app":
    command = ["python3", "-S", APP] + app
elif scenario["command"] == "script":
    # No "#!": the kernel answers ENOEXEC.
    command = script("app-script", "", 0o755)
elif scenario["command"] == "noexec":
    # A script without the execute bit: EACCES.
    command = script("not-executable", "#!/bin/sh\n", 0o644)
else:
    command = [os.path.join(run, "missing")] + app
roles = [] if scenario["command"] in ("missing", "noexec") else ["child"] + ([tree] if tree in ("grandchild", "daemon") else [])

os.makedirs(os.path.join(run, "cwd"), exist_ok=True)
extra = os.open(os.path.join(run, "extra"), os.O_RDONLY | os.O_CREAT, 0o644) if scenario["extra_fd"] else None
if extra is not None and extra != 7:
    os.dup2(extra, 7)
    os.close(extra)
    extra = 7


def inherit():
    for s in scenario["ignore"]:
        signal.signal(s, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, scenario["block"])


argv = scenario["init"] + command
if pid1:
    argv = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "--"] + argv
env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
env.update(scenario["env"])
top = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=open(os.path.join(run, "stdout"), "w"),
                       stderr=open(os.path.join(run, "stderr"), "w"), cwd=os.path.join(run, "cwd"), env=env,
                       preexec_fn=inherit, start_new_session=scenario["session"],
                       pass_fds=(extra,) if extra is not None else ())
status = None


def done():
    global status
    if status is None:
        pid, st = os.waitpid(top.pid, os.WNOHANG)
        if pid == top.pid:
            status = st
    return status is not None


def wait_for(check, what):
    deadline = time.monotonic() + LIMIT
    while not check():
        if time.monotonic() > deadline:
            notes.append(f"timed out waiting for {what}")
            return False
        time.sleep(0.005)
    return True


def stopped(pid):
    return state_letter(pid) in ("T", "t")


def alive(pid):
    return pid is not None and state_letter(pid) not in ("Z", "X", "gone")


def nspid(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("NSpid:"):
                return [int(x) for x in line.split()[1:]]
    except OSError:
        pass
    return []


def outer(inner):
    """The pid, as seen here, of the process that sees itself as `inner`."""
    for p in descendants():
        ns = nspid(p)
        if len(ns) == (2 if pid1 else 1) and ns[-1] == inner:
            return p
    return None


def lines(role):
    try:
        text = open(log).read()
    except OSError:
        return []
    return [l.split(" ", 1)[1] for l in text.splitlines() if l.split(" ", 1)[0] == role]


def count(role, line):
    return lines(role).count(line)


def kill(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


init = top.pid
if pid1:
    def found():
        global init
        kids = children(top.pid)
        if kids:
            init = kids[0]
        return bool(kids) or done()
    wait_for(found, "unshare's child")

ready = wait_for(lambda: done() or all("ready" in lines(r) for r in roles), "the app's ready lines")
states, pids = {}, {}
for r in roles:
    st = [json.loads(l[6:]) for l in lines(r) if l.startswith("state ")]
    if st:
        states[r] = st[0]
        pids[r] = outer(st[0]["pid"])

def mark_others():
    for r in roles[1:]:
        p = pids.get(r)
        if alive(p):
            before = count(r, f"sig {MARK}")
            kill(p, MARK)
            wait_for(lambda: not alive(p) or count(r, f"sig {MARK}") > before, f"{r}'s mark")


def caught(r):
    return [int(l[4:]) for l in lines(r) if l.startswith("sig ") and int(l[4:]) not in (FENCE, MARK, FIN)]


confirmed = {r: [] for r in roles}


def confirm():
    """What the tree took while the main child still lived: read first, then the child is
    checked, so that nothing the init sent on the child's end can be in it."""
    global confirmed
    snapshot = {r: caught(r) for r in roles}
    if alive(child) and not done():
        confirmed = snapshot


child = pids.get("child")
if ready and not done():
    for s in scenario["signals"]:
        if done() or not alive(child):
            break
        before, taken = count("child", f"sig {FENCE}"), count("child", f"sig {s}")
        kill(init, s)
        kill(init, FENCE)
        if not wait_for(lambda: done() or not alive(child) or count("child", f"sig {FENCE}") > before
                        or stopped(init) or stopped(child), f"the fence after signal {s}"):
            break
        if stopped(init) or stopped(child):
            # dumb-init forwards TSTP, TTIN and TTOU (as SIGSTOP in setsid mode), then stops
            # itself (unless PID 1): CONT sent to the init wakes it, and it forwards the CONT.
            notes.append(f"on signal {s}, stopped: {'the init' if stopped(init) else 'the app'}")
            # A CONT discards the stop signals still pending in its target: the app takes what the
            # init forwarded first.
            wait_for(lambda: done() or not alive(child) or stopped(child) or count("child", f"sig {s}") > taken,
                     f"the app to take signal {s}")
            kill(init, signal.SIGCONT)
            if not wait_for(lambda: done() or not alive(child) or count("child", f"sig {FENCE}") > before,
                            f"the fence after signal {s} and CONT"):
                break
        # The rest of the tree takes what the init sent it before the next signal too.
        if alive(child) and not done():
            mark_others()
            confirm()


if alive(child) and not done():
    mark_others()
    confirm()
if alive(child):
    kill(child, FIN)
forced = not wait_for(done, "the init's end")
if forced:
    kill(top.pid, signal.SIGKILL)
    kill(init, signal.SIGKILL)
    status = os.waitpid(top.pid, 0)[1]

outcome = {
    "status": f"exited {os.waitstatus_to_exitcode(status)}" if os.WIFEXITED(status) else f"signaled {os.WTERMSIG(status)}",
    "stderr written": os.path.getsize(os.path.join(run, "stderr")) > 0,
    "stdout written": os.path.getsize(os.path.join(run, "stdout")) > 0,
    "ready": ready,
}
if not pid1:
    mark_others()
names = {1: "init"} if pid1 else {1: "driver", init: "init"}
for r in roles:
    if r in states:
        names[states[r]["pid"]] = r
left = []
for p in descendants():
    if not alive(p):
        continue
    ns = nspid(p)
    role = names.get(ns[-1]) if ns and len(ns) == (2 if pid1 else 1) and names.get(ns[-1]) in roles else None
    try:
        comm = open(f"/proc/{p}/comm").read().strip()
    except OSError:
        continue
    left.append(f"{role or comm} {'T' if state_letter(p) in ('T', 't') else 'S'}")
# After a SIGKILL to an init that did not end, what is left raced that kill.
outcome["left"] = "killed" if forced else sorted(left)
for r in roles:
    # As PID 1, the init's end takes its namespace with it: what the rest of the tree took after
    # the main child's end raced the kernel's SIGKILL, so only what it took while the child lived
    # is compared (the child's own signals all come before its end).
    if pid1 and r != "child":
        outcome[f"{r}: signals taken while the app lived"] = confirmed[r]
    else:
        outcome[f"{r}: signals taken"] = caught(r)
    st = states.get(r)
    outcome[f"{r}: started"] = st is not None
    if st is None:
        continue
    for key in ("ppid", "pgid", "sid"):
        outcome[f"{r}: {key}"] = names.get(st[key], "outside" if st[key] == 0 else "other")
    outcome[f"{r}: mask"] = st["blk"]
    outcome[f"{r}: ignored"] = st["ign"]
    # "?": the fd that listed the others, closed by then.
    outcome[f"{r}: fds"] = {k: ("pipe" if v.startswith("pipe:") else v.replace(run, "RUN")) for k, v in st["fds"].items() if v != "?"}
    outcome[f"{r}: env"] = {k: v.replace(run, "RUN") for k, v in st["env"].items()}
    outcome[f"{r}: cwd"] = st["cwd"].replace(run, "RUN")
outcome["notes"] = notes
# One observable a line: its name, a tab, its value as JSON.
with open(os.path.join(run, "outcome.tmp"), "w") as f:
    for key in sorted(outcome):
        f.write(f"{key}\t{json.dumps(outcome[key], sort_keys=True)}\n")
os.rename(os.path.join(run, "outcome.tmp"), os.path.join(run, "outcome"))
