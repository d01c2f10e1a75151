# tests/differential.rs: the app an init runs. Usage: app.py LOG TREE ON_TERM ENDING VALUE.
# Each process of its tree appends lines to LOG (one write each, O_APPEND):
#   ROLE state JSON   what it inherited, read before it changes anything: pid, ppid, pgid, sid,
#                     SigBlk and SigIgn from /proc/self/status, open fds, environment, cwd
#   ROLE ready        it takes every signal from now on
#   ROLE sig N        a signal taken, in the order taken
#   ROLE end          the main child performs its ending now
# TREE: alone, grandchild (forked, same group), daemon (double fork and setsid), orphan (a
# process that ends at once, after its parent: a zombie for whoever reaps orphans).
# ON_TERM (the main child's): exit (ends as on FIN), catch, ignore (SIG_IGN).
# ENDING code N / signal N; FIN (SIGRTMIN+7 sent by the driver) starts it.
import json, os, signal, sys, time

log, tree, on_term, ending, value = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
FIN = signal.SIGRTMIN + 7
# Python itself ignores PIPE and XFSZ at start-up, so what the process inherited for those two
# cannot be read here: they are left out of SigIgn (the test never draws them).
PYTHON_IGNORES = (1 << (signal.SIGPIPE - 1)) | (1 << (signal.SIGXFSZ - 1))


def write(role, text):
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, f"{role} {text}\n".encode())
    finally:
        os.close(fd)


def state(role):
    status = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            status[key] = rest.strip()
    fd_dir = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
    fds = {}
    for name in os.listdir(fd_dir):
        if int(name) == fd_dir:
            continue
        try:
            target = os.readlink(name, dir_fd=fd_dir)
        except OSError:
            target = "?"
        fds[name] = target
    os.close(fd_dir)
    write(role, "state " + json.dumps({
        "pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0), "sid": os.getsid(0),
        "blk": status["SigBlk"], "ign": "%016x" % (int(status["SigIgn"], 16) & ~PYTHON_IGNORES),
        "fds": fds, "env": dict(os.environ), "cwd": os.getcwd(),
    }, sort_keys=True))


def recorder(role, term):
    # Signals are taken with sigwaitinfo, not handlers: the kernel hands them over one at a time,
    # in the order they came (lowest number first among those pending together), and queues
    # each real-time one; Python's handlers run in number order and merge repeats.
    waited = [s for s in range(1, signal.SIGRTMAX + 1)
              if s not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD, 32, 33)
              and not (s == signal.SIGTERM and term == "ignore")]
    signal.pthread_sigmask(signal.SIG_SETMASK, waited)
    if term == "ignore":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    write(role, "ready")
    while True:
        signum = signal.sigwaitinfo(waited).si_signo
        write(role, f"sig {signum}")
        if signum == FIN or (signum == signal.SIGTERM and term == "exit"):
            if role == "child":
                end()
            os._exit(0)


def end():
    write("child", "end")
    if ending == "code":
        os._exit(value)
    if value != signal.SIGKILL:
        signal.signal(value, signal.SIG_DFL)
    os.kill(os.getpid(), value)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [value])
    os._exit(99)


state("child")
if tree == "grandchild":
    if os.fork() == 0:
        state("grandchild")
        recorder("grandchild", "exit")
elif tree == "daemon":
    if os.fork() == 0:
        os.setsid()
        parent = os.getpid()
        if os.fork() == 0:
            # Its state once it is an orphan, so that its parent is not a race.
            while os.getppid() == parent:
                time.sleep(0.001)
            state("daemon")
            recorder("daemon", "catch")
        os._exit(0)
    os.wait()
elif tree == "orphan":
    r, w = os.pipe()
    if os.fork() == 0:
        leaf = os.fork()
        if leaf == 0:
            os._exit(0)
        os.write(w, str(leaf).encode())
        os._exit(0)
    os.close(w)
    leaf = int(os.read(r, 32))
    os.wait()
    # Ready only once the orphan has ended: its SIGCHLD is then the init's before anything the
    # driver sends (or it was reaped already), whatever the machine's load.
    while True:
        try:
            with open(f"/proc/{leaf}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    break
        except (OSError, IndexError):
            break
        time.sleep(0.001)
recorder("child", on_term)
