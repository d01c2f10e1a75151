//! What a run and a probe are configured to do: `Config` and `ProbeConfig`, as `cli` builds them
//! and the supervisor and the probe read them.
//!
//! May import: logging (`Format`), machine (`UnreadyOn`), personality, signals, user.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use log::LevelFilter;

use crate::logging::Format;
use crate::machine::UnreadyOn;
use crate::personality::Personality;
use crate::signals::Sig;

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
    /// Who lastcall is, by the name it was run under: its defaults are already in the fields
    /// above; the supervisor reads the rest (what happens when the main child exits, job
    /// control, exec failures).
    pub personality: &'static Personality,
    /// Said once at start-up, as warnings: `LASTCALL_*` variables lastcall does not know.
    pub warnings: Vec<String>,
    /// The command is lastcall too (`nested`): this one only forwards, reaps and exits.
    pub nested: bool,
}

impl Config {
    /// What an outer lastcall keeps when its command is lastcall too: forwarding, reaping, the
    /// process-group mode and the exit. The shutdown's features (pre-stop, grace, stop signal,
    /// rewrites, readiness, health, notify) and the warnings about variables are the inner one's,
    /// which reads the same variables; done twice they would bind the health port twice, run the
    /// pre-stop twice and rewrite a signal twice.
    pub fn step_aside(self) -> Config {
        Config {
            pre_stop: Duration::ZERO,
            grace: None,
            unready_on: UnreadyOn::Signal,
            stop_signal: None,
            rewrite: vec![],
            ready_file: None,
            health_listen: None,
            warnings: vec![],
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
