//! What a run and a probe are configured to do: `Config` and `ProbeConfig`, as `cli` builds them
//! and the supervisor and the probe read them.
//!
//! Every choice a personality makes is resolved by `cli` into the fields below, so the supervisor
//! reads what to do and never which name it runs under.
//!
//! May import: logging (`Format`), machine (`OnMainExit`, `UnreadyOn`), personality, signals, user.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use log::LevelFilter;

use crate::logging::Format;
use crate::machine::{OnMainExit, UnreadyOn};
use crate::personality::{ChildSignals, Exits};
use crate::signals::{Sig, Suspend};

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub command: Vec<OsString>,
    pub pre_stop: Duration,
    /// `None`: never escalate to SIGKILL (`--grace 0`).
    pub grace: Option<Duration>,
    /// When readiness goes: at the first termination signal, or when the stop signal is forwarded.
    pub unready_on: UnreadyOn,
    /// `None`: forward the signal that was received.
    pub stop_signal: Option<Sig>,
    /// Received → forwarded; `Sig(0)` drops the signal.
    pub rewrite: Vec<(Sig, Sig)>,
    pub ready_file: Option<PathBuf>,
    pub health_listen: Option<SocketAddr>,
    /// Signal the child only, not its process group (dumb-init's -c).
    pub single_child: bool,
    /// The child gets its own session, and lastcall does dumb-init's job control.
    pub setsid: bool,
    /// Child exit codes reported as 0 (tini's -e).
    pub remap_exit: Vec<i32>,
    pub parent_death_signal: Option<Sig>,
    pub warn_reaping: bool,
    pub subreaper: Subreaper,
    /// catatonit's -P: no command; wait for a termination signal.
    pub pause: bool,
    /// Who the app runs as (`--user`); lastcall itself stays who it was.
    pub user: Option<crate::user::Spec>,
    /// PR_SET_NO_NEW_PRIVS for the app.
    pub no_new_privs: bool,
    pub log_level: LevelFilter,
    pub log_format: Format,
    /// The name lastcall runs under, as its messages and /metrics show it.
    pub name: &'static str,
    /// Not PID 1 and no subreaper: say that orphans will not come back to be reaped.
    pub warn_without_subreaper: bool,
    /// The app finds LASTCALL_PRE_STOP_MS, LASTCALL_GRACE_MS and LASTCALL_CLOCK_ZERO_NS in its
    /// environment.
    pub deadlines_in_env: bool,
    /// With `single_child` and no `setsid`, the child still gets a process group of its own.
    pub own_group_for_single_child: bool,
    /// The signal mask and dispositions the app starts with.
    pub child_signals: ChildSignals,
    /// lastcall leaves its directory while the app runs, so that it keeps no mount busy.
    pub leaves_cwd: bool,
    /// A file exec refuses as no program runs as `/bin/sh FILE ARGS...`.
    pub scripts_through_sh: bool,
    /// What the rest get when the main child exits.
    pub on_main_exit: OnMainExit,
    /// What the app gets for TSTP, TTIN and TTOU before lastcall stops itself; `None`: TSTP is
    /// forwarded, TTIN and TTOU dropped.
    pub suspend: Option<Suspend>,
    /// SIGCONT right after each stop signal of the shutdown.
    pub cont_after_stop: bool,
    /// The text log names a process the OOM killer killed.
    pub names_oom_kills: bool,
    /// The exit codes of a failed start, and how lastcall ends.
    pub exits: Exits,
    /// What lastcall's own environment says to the set-up (beyond the options).
    pub inherited: Inherited,
    /// Said once at start-up, as warnings: `LASTCALL_*` variables lastcall does not know.
    pub warnings: Vec<String>,
    /// The options given on the command line with a value, as the variables that say the same
    /// (`LASTCALL_GRACE`, "1s"; a repeated list joined with commas): what an outer lastcall hands
    /// down to an inner one when it steps aside.
    pub flags: Vec<(&'static str, String)>,
    /// The command is lastcall too (`inner_lastcall`): this one only forwards, reaps, keeps a last
    /// SIGKILL and exits.
    pub nested: bool,
}

/// The variables of what an outer lastcall leaves to the inner one: given to the outer as
/// flags, they are set in the inner's environment (over an inherited value, as the flag won over
/// it for the outer). Every other option is one the outer still carries out itself.
pub const HANDED_DOWN: &[&str] = &[
    "LASTCALL_PRE_STOP",
    "LASTCALL_GRACE",
    "LASTCALL_STOP_TIMEOUT",
    "LASTCALL_UNREADY_ON",
    "LASTCALL_STOP_SIGNAL",
    "LASTCALL_REWRITE",
    "LASTCALL_READY_FILE",
    "LASTCALL_HEALTH_LISTEN",
    "LASTCALL_USER",
    "LASTCALL_LOG_FORMAT",
];

/// What an outer lastcall waits past its own pre-stop and grace before its backstop SIGKILL: room
/// for the inner one's own SIGKILL, reaping and exit, so that the two never race.
pub const BACKSTOP_MARGIN: Duration = Duration::from_secs(2);

/// The variables of lastcall's environment that the set-up acts on, read once by `cli`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inherited {
    /// NOTIFY_SOCKET, when set, not empty and text.
    pub notify_socket: Option<String>,
    /// The first directory of systemd's RUNTIME_DIRECTORY, where the notify socket goes first.
    pub runtime_directory: Option<PathBuf>,
    /// PATH, to find the command.
    pub path: Option<OsString>,
    /// The pid variables (LISTEN_PID, WATCHDOG_PID) that are set, with their values.
    pub pid_variables: Vec<(&'static str, OsString)>,
    /// Which of USER and LOGNAME are set (`--user` sets the others).
    pub user_names_set: Vec<&'static str>,
}

impl Config {
    /// What an outer lastcall keeps when its command is lastcall too: forwarding, reaping, the
    /// process-group mode, the exit, and a backstop. The shutdown's features (pre-stop, grace,
    /// stop signal, rewrites, readiness, health, notify), the user switch and the warnings about
    /// variables are the inner one's, which reads the same variables; done twice they would bind
    /// the health port twice, run the pre-stop twice, rewrite a signal twice, and leave the inner
    /// one (which does the SIGKILL) as the app's uid, open to the app's signals.
    ///
    /// Stepping aside never weakens what this one was asked to do:
    /// - its flags for those features are handed down (`HANDED_DOWN`; `flags` keeps only them);
    /// - the backstop: its own pre-stop and grace plus `BACKSTOP_MARGIN`, counted from its stop
    ///   signal or from the inner one's death, after which everything left gets SIGKILL (no
    ///   backstop only when this one was told never to escalate, as it would not have alone);
    /// - `cannot_tell` (the command's file could not be read): the user switch stays this one's,
    ///   since the command may be an app that must not run as who lastcall is.
    pub fn step_aside(self, cannot_tell: bool) -> Config {
        let backstop = self.grace.map(|g| self.pre_stop.saturating_add(g).saturating_add(BACKSTOP_MARGIN));
        let keep_user = cannot_tell && self.user.is_some();
        let flags = self
            .flags
            .into_iter()
            .filter(|(name, _)| HANDED_DOWN.contains(name) && !(keep_user && *name == "LASTCALL_USER"))
            .collect();
        Config {
            pre_stop: Duration::ZERO,
            grace: backstop,
            unready_on: UnreadyOn::Signal,
            stop_signal: None,
            rewrite: vec![],
            ready_file: None,
            health_listen: None,
            user: if keep_user { self.user } else { None },
            warnings: vec![],
            flags,
            nested: true,
            ..self
        }
    }
}

/// Whether lastcall, when not PID 1, registers as a child subreaper, and who wanted it. Only what
/// was asked for may stop the start: qemu-user (`docker run --platform`) answers the prctl with
/// EINVAL, and a default must not make lastcall unusable there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subreaper {
    Off,
    /// On because nothing said otherwise: a failure is a warning.
    Default,
    /// On because `-s`, `LASTCALL_SUBREAPER` or `TINI_SUBREAPER` said so: a failure exits 125.
    Asked,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ProbeConfig {
    pub target: ProbeTarget,
    pub health_listen: Option<SocketAddr>,
    pub ready_file: Option<PathBuf>,
    /// How long the whole probe may take, resolving the name included.
    pub timeout: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeTarget {
    Ready,
    Live,
    /// `http://HOST[:PORT][/PATH]`: healthy on 2xx and 3xx, as the kubelet's httpGet.
    Http { host: String, port: u16, path: String },
    /// `tcp://HOST:PORT`: healthy when a connection is made.
    Tcp { host: String, port: u16 },
}

/// The kubelet's default probe timeout, for `probe http://` and `tcp://`.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// `probe ready|live`'s, unchanged: the health endpoint may take most of a second under a flood.
pub const HEALTH_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;

    fn outer(grace: Option<Duration>, flags: &[(&'static str, &str)]) -> Config {
        Config {
            command: vec!["inner".into()],
            pre_stop: Duration::from_secs(3),
            grace,
            unready_on: UnreadyOn::Stop,
            stop_signal: Some(Sig(libc::SIGQUIT)),
            rewrite: vec![(Sig(libc::SIGINT), Sig(libc::SIGTERM))],
            ready_file: Some("/tmp/ready".into()),
            health_listen: Some("127.0.0.1:1".parse().unwrap()),
            single_child: false,
            setsid: false,
            remap_exit: vec![],
            parent_death_signal: None,
            warn_reaping: false,
            subreaper: Subreaper::Default,
            pause: false,
            user: Some(crate::user::parse_spec("1000").unwrap()),
            no_new_privs: false,
            log_level: LevelFilter::Info,
            log_format: Format::Text,
            warnings: vec!["a warning".into()],
            flags: flags.iter().map(|&(n, v)| (n, v.to_string())).collect(),
            nested: false,
            name: "lastcall",
            warn_without_subreaper: false,
            deadlines_in_env: true,
            own_group_for_single_child: true,
            child_signals: ChildSignals::Inherited,
            leaves_cwd: true,
            scripts_through_sh: false,
            on_main_exit: OnMainExit::StopTheRest,
            suspend: None,
            cont_after_stop: true,
            names_oom_kills: true,
            exits: crate::personality::LASTCALL.exits(),
            inherited: Inherited::default(),
        }
    }

    #[test]
    fn stepping_aside_keeps_a_backstop() {
        let c = outer(Some(Duration::from_secs(5)), &[]).step_aside(false);
        assert_eq!(c.grace, Some(Duration::from_secs(3 + 5) + BACKSTOP_MARGIN), "pre-stop + grace + margin");
        assert_eq!((c.pre_stop, c.stop_signal, c.rewrite.len(), c.nested), (Duration::ZERO, None, 0, true));
        assert!(c.ready_file.is_none() && c.health_listen.is_none() && c.warnings.is_empty());
        // Told never to escalate, it would not have alone either.
        assert_eq!(outer(None, &[]).step_aside(false).grace, None);
    }

    #[test]
    fn stepping_aside_hands_the_flags_down_and_the_user_switch_too() {
        let flags = [("LASTCALL_GRACE", "1s"), ("LASTCALL_USER", "1000"), ("LASTCALL_REMAP_EXIT", "143")];
        let c = outer(Some(Duration::from_secs(1)), &flags).step_aside(false);
        assert_eq!(c.flags, vec![("LASTCALL_GRACE", "1s".to_string()), ("LASTCALL_USER", "1000".to_string())], "-e stays the outer's");
        assert_eq!(c.user, None, "the inner one switches");
        // The command could not be read: it may be an app, which must not run as root.
        let c = outer(Some(Duration::from_secs(1)), &flags).step_aside(true);
        assert!(c.user.is_some());
        assert_eq!(c.flags, vec![("LASTCALL_GRACE", "1s".to_string())]);
    }
}
