//! The option table: every option's spellings, whether it takes a value, its variable and its
//! help, and the help text made from it; and the license text, packed. Reading the values and
//! deciding precedence is `cli`'s.
//!
//! May import: personality.

use crate::personality::Personality;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Id {
    PreStop,
    Grace,
    StopTimeout,
    UnreadyOn,
    StopSignal,
    Rewrite,
    ReadyFile,
    HealthListen,
    User,
    NoNewPrivs,
    SingleChild,
    Setsid,
    Group,
    RemapExit,
    ParentDeathSignal,
    WarnReaping,
    Subreaper,
    NoSubreaper,
    Pause,
    Verbose,
    Quiet,
    LogFormat,
    Help,
    Version,
    License,
    ProbeTimeout,
}

/// One option: its spellings, whether it takes a value, and the variable that can stand in for it.
pub(super) struct Opt {
    pub(super) id: Id,
    pub(super) long: &'static str,
    pub(super) shorts: &'static [char],
    pub(super) value: Option<&'static str>,
    pub(super) env: Option<&'static str>,
    pub(super) help: &'static str,
}

pub(super) const OPTIONS: &[Opt] = &[
    Opt {
        id: Id::PreStop,
        long: "pre-stop",
        shorts: &[],
        value: Some("DURATION"),
        env: Some("LASTCALL_PRE_STOP"),
        help: "after the first termination signal, wait this long with the app untouched [default: 0]",
    },
    Opt {
        id: Id::Grace,
        long: "grace",
        shorts: &[],
        value: Some("DURATION"),
        env: Some("LASTCALL_GRACE"),
        help: "after forwarding the stop signal, wait this long, then SIGKILL; 0 never escalates [default: 8s, or what --stop-timeout leaves]",
    },
    Opt {
        id: Id::StopTimeout,
        long: "stop-timeout",
        shorts: &[],
        value: Some("DURATION"),
        env: Some("LASTCALL_STOP_TIMEOUT"),
        help: "the platform's stop budget (docker stop -t, stop_grace_period, terminationGracePeriodSeconds, TimeoutStopSec): grace defaults to what the pre-stop leaves of it less 2s, and a pre-stop + grace that does not fit is refused",
    },
    Opt {
        id: Id::UnreadyOn,
        long: "unready-on",
        shorts: &[],
        value: Some("signal|stop"),
        env: Some("LASTCALL_UNREADY_ON"),
        help: "when /ready and the ready file go: at the first termination signal, or when the stop signal is forwarded after the pre-stop [default: signal]",
    },
    Opt {
        id: Id::StopSignal,
        long: "stop-signal",
        shorts: &[],
        value: Some("SIGNAL"),
        env: Some("LASTCALL_STOP_SIGNAL"),
        help: "forward this instead of the termination signal received [default: the one received]",
    },
    Opt {
        id: Id::Rewrite,
        long: "rewrite",
        shorts: &['r'],
        value: Some("FROM:TO"),
        env: Some("LASTCALL_REWRITE"),
        help: "forward FROM as TO (TO=0 drops it); repeatable; the variable takes a comma list",
    },
    Opt {
        id: Id::ReadyFile,
        long: "ready-file",
        shorts: &[],
        value: Some("PATH"),
        env: Some("LASTCALL_READY_FILE"),
        help: "create PATH once the app runs, remove it the moment shutdown starts",
    },
    Opt {
        id: Id::HealthListen,
        long: "health-listen",
        shorts: &[],
        value: Some("ADDR:PORT"),
        env: Some("LASTCALL_HEALTH_LISTEN"),
        help: "serve GET /ready (503 from the first termination signal) and GET /live over HTTP",
    },
    Opt {
        id: Id::User,
        long: "user",
        shorts: &[],
        value: Some("USER[:GROUP]"),
        env: Some("LASTCALL_USER"),
        help: "run the app as USER (a name in the image's /etc/passwd, or a uid) and GROUP; lastcall stays as it is",
    },
    Opt {
        id: Id::NoNewPrivs,
        long: "no-new-privs",
        shorts: &[],
        value: None,
        env: Some("LASTCALL_NO_NEW_PRIVS"),
        help: "start the app with no_new_privs: setuid binaries and file capabilities grant it nothing",
    },
    Opt {
        id: Id::SingleChild,
        long: "single-child",
        shorts: &['c'],
        value: None,
        env: Some("LASTCALL_SINGLE_CHILD"),
        help: "signal only the child, not its process group (also DUMB_INIT_SETSID=0, TINI_KILL_PROCESS_GROUP=0)",
    },
    Opt {
        id: Id::Setsid,
        long: "setsid",
        shorts: &[],
        value: None,
        env: Some("LASTCALL_SETSID"),
        help: "dumb-init's mode: the child gets its own session; TSTP/TTIN/TTOU stop it and lastcall (also DUMB_INIT_SETSID=1)",
    },
    Opt {
        id: Id::Group,
        long: "group",
        shorts: &['g'],
        value: None,
        env: None,
        help: "signal the child's process group (the default; tini's -g)",
    },
    Opt {
        id: Id::RemapExit,
        long: "remap-exit",
        shorts: &['e'],
        value: Some("CODE"),
        env: Some("LASTCALL_REMAP_EXIT"),
        help: "report this child exit code as 0, e.g. 143; repeatable; the variable takes a comma list",
    },
    Opt {
        id: Id::ParentDeathSignal,
        long: "parent-death-signal",
        shorts: &['p'],
        value: Some("SIGNAL"),
        env: Some("LASTCALL_PARENT_DEATH_SIGNAL"),
        help: "have the kernel send lastcall SIGNAL when its parent dies",
    },
    Opt {
        id: Id::WarnReaping,
        long: "warn-reaping",
        shorts: &['w'],
        value: None,
        env: Some("LASTCALL_WARN_REAPING"),
        help: "warn about each reaped process that was not the child",
    },
    Opt {
        id: Id::Subreaper,
        long: "subreaper",
        shorts: &['s'],
        value: None,
        env: Some("LASTCALL_SUBREAPER"),
        help: "when not PID 1, adopt orphaned descendants (the default; also TINI_SUBREAPER)",
    },
    Opt {
        id: Id::NoSubreaper,
        long: "no-subreaper",
        shorts: &[],
        value: None,
        env: None,
        help: "do not register as a child subreaper",
    },
    Opt {
        id: Id::Pause,
        long: "pause",
        shorts: &['P'],
        value: None,
        env: None,
        help: "run no command: wait for a termination signal, reaping orphans (catatonit's -P)",
    },
    Opt {
        id: Id::Verbose,
        long: "verbose",
        shorts: &['v'],
        value: None,
        env: None,
        help: "log more: -v every signal, -vv everything [env: LASTCALL_LOG=debug|trace]",
    },
    Opt {
        id: Id::Quiet,
        long: "quiet",
        shorts: &['q'],
        value: None,
        env: None,
        help: "log less: -q no shutdown timeline (warnings only), -qq errors only, -qqq nothing [env: LASTCALL_LOG=warn|error|off]",
    },
    Opt {
        id: Id::LogFormat,
        long: "log-format",
        shorts: &[],
        value: Some("text|json"),
        env: Some("LASTCALL_LOG_FORMAT"),
        help: "json: one JSON object a line (ts, level, event, fields, message); text is the default",
    },
    Opt { id: Id::Help, long: "help", shorts: &['h'], value: None, env: None, help: "print this help" },
    Opt { id: Id::Version, long: "version", shorts: &['V'], value: None, env: None, help: "print the version" },
    Opt { id: Id::License, long: "license", shorts: &['l', 'L'], value: None, env: None, help: "print the license" },
];

/// Options of `lastcall probe` only.
pub(super) const PROBE_OPTIONS: &[Opt] = &[Opt {
    id: Id::ProbeTimeout,
    long: "timeout",
    shorts: &[],
    value: Some("DURATION"),
    env: None,
    help: "give up after this long [default: 1s; ready|live: 2s]",
}];

pub(super) const ABOUT: &str = "lastcall: a tiny init for containers. It runs COMMAND in its own process group,
forwards signals to that group, reaps zombies, and on TERM, INT or QUIT shuts down in
order: unready, pre-stop, stop signal, grace, SIGKILL. It exits with COMMAND's status.";

const AFTER_HELP: &str = "Probes, for images with no shell or curl:
  lastcall probe ready|live [--health-listen ADDR:PORT | --ready-file PATH]
  exits 0 if the app is ready (or live), 1 if not, saying why on stderr; the variables above
  work too.
  lastcall probe http://HOST:PORT/PATH | tcp://HOST:PORT [--timeout DURATION]
  exits 0 on a 2xx or 3xx answer (http) or a connection (tcp), 1 if not, saying why on stderr;
  the timeout (default 1s) bounds the whole probe.

DURATION: 500ms, 5s, 1m30s, 1h; a plain number means seconds.
SIGNAL: TERM, SIGTERM, 15, RTMIN+2.
Every option can also be set by the variable shown; a flag wins over its variable.
A LASTCALL_* variable lastcall does not know is warned about; LASTCALL_STRICT=1 makes it an error.
Letter case: words in values (signal names, booleans, log levels, signal|stop, duration units)
are read in any case; paths and addresses are taken as written.
Booleans: 1/true/yes/on or 0/false/no/off. tini's TINI_SUBREAPER, TINI_KILL_PROCESS_GROUP and
TINI_VERBOSITY and dumb-init's DUMB_INIT_SETSID are read too, and 0 means off.
The child gets LASTCALL_PRE_STOP_MS, LASTCALL_GRACE_MS and LASTCALL_CLOCK_ZERO_NS (the timeline's
zero, CLOCK_MONOTONIC in ns) in its environment.
When COMMAND is lastcall too (docker run --init in front of a lastcall ENTRYPOINT), this one
only forwards signals, reaps and exits with its status; the inner one does the rest.

Exit status: COMMAND's; if it died from signal N, lastcall dies from N too, or as PID 1
(which cannot) exits 128+N (137 after the escalation);
126 if it cannot be executed; 127 if it is not found; 125 if lastcall itself fails;
2 for a usage error.";

/// Both texts, as tini's `-l` prints its own.
pub(super) const LICENSE: &str = concat!(
    "lastcall is licensed under the MIT license or the Apache License 2.0, at your option.\n\n",
    include_str!("../../LICENSE-MIT"),
    "\n",
    include_str!("../../LICENSE-APACHE"),
);

/// `LICENSE`, as `--license` prints it. Only its packed form is in the binary: the texts are
/// most of what the binary carries besides code, and they repeat themselves.
pub(super) fn license() -> String {
    unpack(&PACKED)
}

// The compiler packs the text (const evaluation), so no packed copy is kept in the sources. A
// token is either a run of 1 to 128 bytes as they are (the token is the length less one) or a
// copy of 3 to 130 earlier bytes (128 + the length less three), then how far back it starts in
// two bytes, little-endian.
const TEXT: &[u8] = LICENSE.as_bytes();
const MAX_RUN: usize = 128;
const COPY: usize = 128;
const MIN_COPY: usize = 3;
const MAX_COPY: usize = 130;
const ROOM: usize = TEXT.len() + TEXT.len() / MAX_RUN + 1;
const PACKING: ([u8; ROOM], usize) = pack();
const PACKED: [u8; PACKING.1] = {
    let mut packed = [0; PACKING.1];
    let mut i = 0;
    while i < packed.len() {
        packed[i] = PACKING.0[i];
        i += 1;
    }
    packed
};

/// Greedy LZ77: at each byte, the longest copy among the last few earlier places whose first
/// three bytes hash alike.
const fn pack() -> ([u8; ROOM], usize) {
    const HASHES: usize = 4096;
    const DEPTH: usize = 16;
    const fn hash(at: usize) -> usize {
        (TEXT[at] as usize * 961 + TEXT[at + 1] as usize * 31 + TEXT[at + 2] as usize) % HASHES
    }
    let mut out = [0u8; ROOM];
    let mut len = 0;
    // For each hash, 1 + the latest place with it; for each place, 1 + the one before it.
    let mut latest = [0usize; HASHES];
    let mut before = [0usize; TEXT.len()];
    let (mut i, mut run) = (0, 0);
    while i < TEXT.len() {
        let (mut best, mut from) = (0, 0);
        if i + MIN_COPY <= TEXT.len() {
            let (mut candidate, mut depth) = (latest[hash(i)], 0);
            while candidate > 0 && depth < DEPTH && i - (candidate - 1) <= u16::MAX as usize {
                let at = candidate - 1;
                let mut n = 0;
                while n < MAX_COPY && i + n < TEXT.len() && TEXT[at + n] == TEXT[i + n] {
                    n += 1;
                }
                if n > best {
                    (best, from) = (n, at);
                }
                candidate = before[at];
                depth += 1;
            }
        }
        let step = if best >= MIN_COPY { best } else { 1 };
        let mut k = i;
        while k < i + step && k + MIN_COPY <= TEXT.len() {
            before[k] = latest[hash(k)];
            latest[hash(k)] = k + 1;
            k += 1;
        }
        if step > 1 {
            if run > 0 {
                out[len - run - 1] = (run - 1) as u8;
                run = 0;
            }
            let back = i - from;
            (out[len], out[len + 1], out[len + 2]) = ((COPY + best - MIN_COPY) as u8, back as u8, (back >> 8) as u8);
            len += 3;
        } else {
            // A run's token goes in front of it, written when the run ends.
            len += if run == 0 { 2 } else { 1 };
            out[len - 1] = TEXT[i];
            run += 1;
            if run == MAX_RUN || i + 1 == TEXT.len() {
                out[len - run - 1] = (run - 1) as u8;
                run = 0;
            }
        }
        i += step;
    }
    if run > 0 {
        out[len - run - 1] = (run - 1) as u8;
    }
    (out, len)
}

fn unpack(packed: &[u8]) -> String {
    let mut text = Vec::with_capacity(TEXT.len());
    let mut i = 0;
    while let Some(&token) = packed.get(i) {
        let token = usize::from(token);
        if token < COPY {
            text.extend_from_slice(&packed[i + 1..i + 2 + token]);
            i += 2 + token;
        } else {
            let from = text.len() - usize::from(u16::from_le_bytes([packed[i + 1], packed[i + 2]]));
            for k in from..from + token - COPY + MIN_COPY {
                text.push(text[k]);
            }
            i += 3;
        }
    }
    String::from_utf8(text).unwrap_or_default()
}

pub(super) fn help_text(personality: &Personality) -> String {
    if let Some(help) = personality.peer_help {
        return format!("{help}\nThis {0} is lastcall, which runs as {0} under this name; `lastcall --help` lists all it can do.\n", personality.name);
    }
    let mut text = format!("{ABOUT}\n\nUsage: lastcall [OPTIONS] [--] COMMAND [ARGS]...\n\nOptions:\n");
    let spelled = |opt: &&Opt| personality.has_long(opt.long) || opt.shorts.iter().any(|&c| personality.has_short(c));
    for opt in OPTIONS.iter().filter(spelled) {
        let shorts: Vec<String> = opt.shorts.iter().map(|c| format!("-{c}, ")).collect();
        let mut spelling = format!("{:>8}--{}", shorts.concat(), opt.long);
        if let Some(value) = opt.value {
            spelling = format!("{spelling} {value}");
        }
        if spelling.len() < 34 {
            text.push_str(&format!(" {spelling:<34}{}\n", opt.help));
        } else {
            text.push_str(&format!(" {spelling}\n {:<34}{}\n", "", opt.help));
        }
        if let Some(env) = opt.env {
            text.push_str(&format!(" {:<34}[env: {env}]\n", ""));
        }
    }
    text.push('\n');
    text.push_str(AFTER_HELP);
    text.push('\n');
    text
}

pub(super) fn opt(id: Id) -> &'static Opt {
    OPTIONS.iter().chain(PROBE_OPTIONS).find(|o| o.id == id).expect("every Id has an entry in OPTIONS")
}
