//! The supervisor's set-up, in the order `run()` reads: `resolve` (what this lastcall does
//! itself), `become_init`, `prepare` (everything that can fail on bad input), `launch` (the spawn
//! and what follows it at once) and `supervise` (the loop, `event_loop`, then how lastcall ends,
//! as `Config::exits` says). The sweep (signal-all, kill-all, the /proc walk) is `sweep`.
//! No threads and no periodic timer: with no deadline pending, lastcall sleeps until something
//! arrives.
//!
//! May import: cli (`child_environment`), config, error, health, logging, machine, metrics, notify, oom, personality,
//! procfs, ready_file, reap, signals, sys, launch, inner_lastcall, user.

use std::time::{Duration, Instant};

use log::{debug, error, info, warn};
use nix::sys::signal::SigSet;
use nix::unistd::{getpid, Pid};

use crate::cli;
use crate::config::{Config, Subreaper};
use crate::error::{Error, OneLine};
use crate::health::Health;
use crate::logging::{self, Event};
use crate::machine::{Policy, State};
use crate::metrics::Counters;
use crate::notify::NotifyRelay;
use crate::oom::OomCounter;
use crate::ready_file::ReadyFile;
use crate::personality::{ChildSignals, Ending};
use crate::signals::{Quick, Routes, Sig};
use crate::sys::{self, Detach};
use crate::procfs::ProcReader;
use crate::{inner_lastcall, launch, reap, user};

mod event_loop;
mod sweep;

/// How long SIGKILLed processes get to be reaped before lastcall stops waiting for them
/// (a process stuck in uninterruptible sleep never dies).
const KILL_WAIT: Duration = Duration::from_secs(3);

/// Sets up everything the loop needs, starts the command and supervises it to the end.
/// Returns how lastcall ends. Signals must already be blocked; `mask` is the signal mask
/// lastcall was started with, which the app gets. Each step is called once and inlined here:
/// apart, they would cost binary size.
pub fn run(config: Config, mask: SigSet) -> Result<Ending, Error> {
    // The timeline's clock, which the app gets too (LASTCALL_CLOCK_ZERO_NS): a shared zero must
    // be known when the app starts, so it is lastcall's start, not the first TERM's.
    let (clock_zero_ns, clock_zero) = (sys::monotonic_ns(), Instant::now());
    let config = resolve(config);
    let init = become_init(&config)?;
    if config.pause {
        return Ok(Ending::Code(pause(&init.handled)));
    }
    let prepared = prepare(&config)?;
    let launched = match launch(&config, prepared, mask, clock_zero_ns) {
        Ok(launched) => launched,
        Err(e @ Error::Exec { .. }) => return Ok(Ending::Code(exec_failed(&config, e))),
        Err(e) => return Err(e),
    };
    Ok(supervise(&config, init, launched, clock_zero))
}

/// What this lastcall does itself: all of the configuration, or, when the command is lastcall
/// too, only forwarding, reaping and a backstop. Said once, with the start-up warnings.
#[inline(always)]
fn resolve(config: Config) -> Config {
    // Before anything that the inner lastcall would do again (the health port, the ready file).
    let detected = if config.pause { (inner_lastcall::Detected::NotLastcall, None) } else { inner_lastcall::command_is_lastcall(&config.command, config.inherited.path.as_deref()) };
    let config = match detected {
        (inner_lastcall::Detected::NotLastcall, _) => config,
        (inner_lastcall::Detected::Lastcall, _) => config.step_aside(false),
        (inner_lastcall::Detected::CannotTell, file) => {
            // Stepping aside wrongly loses readiness and health, loudly; not stepping aside for a
            // lastcall binds the health port twice and fails the start.
            let file = file.unwrap_or_default();
            warn!("cannot read {} to tell whether it is lastcall too: taken as one, so readiness, health and the pre-stop are left to it (make it readable to be sure)", OneLine(&file.to_string_lossy()));
            config.step_aside(true)
        }
    };
    if config.nested {
        let backstop = config.grace.map_or("no SIGKILL of its own (never escalate)".to_string(), |g| format!("SIGKILL to what is left {} after its stop signal or the inner one's death", logging::Seconds(g)));
        let handed: Vec<&str> = config.flags.iter().map(|(name, _)| *name).collect();
        let handed = if handed.is_empty() { String::new() } else { format!(", with this one's flags handed down as {}", handed.join(", ")) };
        info!("the command is lastcall too: this one forwards signals, reaps, exits with its status and keeps a backstop ({backstop}); pre-stop, grace, readiness, health, notify and the user switch are the inner one's{handed}");
        // The shutdown timeline is the inner one's too: each of its lines once in the log.
        if log::max_level() == log::LevelFilter::Info {
            log::set_max_level(log::LevelFilter::Warn);
        }
    }
    for warning in &config.warnings {
        warn!("{warning}");
    }
    config
}

/// lastcall's place as the init: the signals its one wait takes, and whether it is PID 1.
struct Init {
    handled: SigSet,
    me: Pid,
    pid1: bool,
}

/// Takes the signals, the parent-death signal and the subreaper role: what pause mode needs too.
#[inline(always)]
fn become_init(config: &Config) -> Result<Init, Error> {
    sys::take_dispositions();
    let handled = sys::handled_set();
    let me = getpid();
    let pid1 = me.as_raw() == 1;
    if let Some(sig) = config.parent_death_signal {
        sys::set_parent_death_signal(sig).map_err(|source| Error::Setup { what: "cannot set the parent-death signal".into(), source })?;
    }
    if !pid1 && config.subreaper != Subreaper::Off {
        // Orphaned grandchildren (a service's double-forked daemon) come back to us to be reaped.
        // qemu-user refuses this prctl (EINVAL): fatal only when it was asked for.
        match nix::sys::prctl::set_child_subreaper(true) {
            Ok(()) => {}
            Err(e) if config.subreaper == Subreaper::Asked => return Err(Error::setup("cannot become a child subreaper", e)),
            Err(e) => warn!("cannot become a child subreaper ({e}); going on without: orphans go to the real init (--no-subreaper says so quietly)"),
        }
    }
    // A subreaper already (subreaper-proxy's prctl survives exec): orphans do come back.
    let already_subreaper = || nix::sys::prctl::get_child_subreaper().unwrap_or(false);
    if !pid1 && config.subreaper == Subreaper::Off && config.warn_without_subreaper && !already_subreaper() {
        warn!(
            "not running as PID 1 and not registered as a child subreaper: orphans will not be re-parented to {0}, \
             so zombie reaping won't work. Use -s or set TINI_SUBREAPER to register {0} as a child subreaper, or run it as PID 1.",
            config.name
        );
    }
    Ok(Init { handled, me, pid1 })
}

/// What the start needs that can fail on bad input: made before the app starts, so that a
/// failure stops the start rather than a running app.
struct Prepared {
    credentials: Option<user::Credentials>,
    ready_file: Option<ReadyFile>,
    health: Option<Health>,
    notify: Option<NotifyRelay>,
}

#[inline(always)]
fn prepare(config: &Config) -> Result<Prepared, Error> {
    let credentials = match &config.user {
        Some(spec) => Some(user::resolve(spec, &user::Files::system())?),
        None => None,
    };
    let ready_file = match &config.ready_file {
        Some(path) => Some(ReadyFile::prepare(path).map_err(|source| Error::Setup {
            what: format!("cannot create the ready file {}", path.display()),
            source,
        })?),
        None => None,
    };
    let health = match config.health_listen {
        Some(addr) => Some(Health::bind(addr, Pid::this()).map_err(|source| Error::Setup {
            what: format!("cannot listen on {addr} for health checks"),
            source,
        })?),
        None => None,
    };
    let app = credentials.as_ref().map(|c| (c.uid, c.gid));
    let notify = match &config.inherited.notify_socket {
        Some(socket) if !config.nested => NotifyRelay::new(socket, app, config.inherited.runtime_directory.as_deref())
            .map_err(|source| Error::Setup { what: "cannot relay NOTIFY_SOCKET".into(), source })?,
        _ => None,
    };
    Ok(Prepared { credentials, ready_file, health, notify })
}

/// The app, started, with what the loop takes over from the set-up.
struct Launched {
    started: launch::Started,
    ready_file: Option<ReadyFile>,
    health: Option<Health>,
    notify: Option<NotifyRelay>,
    oom: Option<OomCounter>,
}

/// Starts the app as the configuration says, then does what must follow its start at once.
#[inline(always)]
fn launch(config: &Config, prepared: Prepared, mask: SigSet, clock_zero_ns: u64) -> Result<Launched, Error> {
    let Prepared { credentials, mut ready_file, mut health, notify } = prepared;
    let runtime = cli::Runtime { notify_socket: notify.as_ref().map(NotifyRelay::child_socket_name), credentials: credentials.as_ref(), clock_zero_ns };
    let env = cli::child_environment(config, runtime);
    let detach = match (config.setsid, config.single_child && !config.own_group_for_single_child) {
        (true, _) => Detach::Session,
        (false, true) => Detach::Inherit,
        (false, false) => Detach::Group,
    };
    let mask = match config.child_signals {
        ChildSignals::Inherited => mask,
        ChildSignals::EmptyMaskStandardDefault => {
            // lastcall's own dispositions are the app's; blocked, they change nothing for lastcall.
            sys::default_standard_dispositions();
            SigSet::empty()
        }
    };
    let ids = credentials.map(|c| sys::Ids { uid: c.uid, gid: c.gid, groups: c.groups });
    let exits = sys::ChildExitCodes { exec: config.exits.exec_codes, exec_other: config.exits.exec_other, setup: config.exits.setup };
    // Never keep a mount busy: lastcall leaves its directory before the app starts, and the app
    // goes back to it before exec; so the app never sees lastcall's cwd change (dumb-init's
    // suite reads it as soon as the app starts).
    let cwd = if config.leaves_cwd { launch::leave_cwd() } else { None };
    let launch = launch::Launch {
        argv: &config.command,
        detach,
        env,
        mask: &mask,
        ids,
        no_new_privs: config.no_new_privs,
        exits,
        cwd: cwd.as_ref().map(std::os::fd::AsFd::as_fd),
        scripts_through_sh: config.scripts_through_sh,
        pid_variables: &config.inherited.pid_variables,
    };
    let started = launch::spawn(launch)?;
    // The app has its directory: an fd held on it would keep the mount busy.
    if config.leaves_cwd && cwd.is_none() {
        launch::leave_cwd_late();
    }
    drop(cwd);
    debug!(event = Event::Started.name(), pid = started.pid.as_raw(); "started {:?} as pid {}", config.command, started.pid);
    // Listed now, while the app execs: the app's are the fds without close-on-exec.
    settle_fds(health.as_mut());
    if let Some(file) = &mut ready_file {
        if let Err(e) = file.create() {
            warn!("cannot create the ready file {}: {e}", file.path().display());
        }
    }
    // Opened now so that a SIGKILL death costs one pread, not a walk through /proc and /sys; and
    // only now, while the app execs on another core, since it is off the start-up's path (an OOM
    // kill within these microseconds would be in the baseline, and go unnamed).
    let oom = OomCounter::open();
    Ok(Launched { started, ready_file, health, notify, oom })
}

/// Runs the loop until the app is gone, and says how lastcall ends.
#[inline(always)]
fn supervise(config: &Config, init: Init, mut launched: Launched, clock_zero: Instant) -> Ending {
    let early_signals = std::mem::take(&mut launched.started.early_signals);
    let mut supervisor = Supervisor::new(config, init, launched, clock_zero);
    let code = early_signals.iter().find_map(|&(sig, sender)| supervisor.on_signal_out_of_line(sig, sender));
    let code = code.unwrap_or_else(|| supervisor.event_loop());
    let ending = config.exits.ending(code, supervisor.state.main, supervisor.pid1, &config.remap_exit);
    // json's last line; text has none (a peer's name prints nothing here).
    if logging::json() {
        match ending {
            Ending::Code(code) => info!(event = Event::Exit.name(), code = code; "exiting with {code}"),
            Ending::Signal(sig) => info!(event = Event::Exit.name(), signal = sig.to_string().as_str(), code = ending.code(); "exiting by {sig}"),
        }
    }
    ending
}

impl Supervisor {
    /// The loop's state at the start: the routes and the short way worked out once from the
    /// configuration, and the app addressed by pidfd where the kernel has them.
    #[inline(always)]
    fn new(config: &Config, init: Init, launched: Launched, clock_zero: Instant) -> Supervisor {
        let Launched { started, ready_file, health, notify, oom } = launched;
        let child = started.pid;
        let policy = Policy {
            pre_stop: config.pre_stop,
            grace: config.grace,
            stop_signal: config.stop_signal,
            rewrite: config.rewrite.clone(),
            kill_wait: KILL_WAIT,
            unready_on: config.unready_on,
            on_main_exit: config.on_main_exit,
            single_child: config.single_child,
        };
        let routes = Routes::new(config.suspend, &config.rewrite);
        // The sockets' readiness signals are told from the app's by their si_code: the long way.
        let readiness = [sys::socket_signal(), Sig(libc::SIGIO)];
        let sockets = notify.is_some() || health.is_some();
        let logged = log::log_enabled!(log::Level::Debug);
        let quick = Quick::new(&routes, if sockets { &readiness } else { &[] }, !logged, !logged && !config.warn_reaping);
        let child_fd = sys::pidfd_open(child.as_raw()).ok();
        let quick_target = match (&child_fd, config.single_child) {
            (_, false) => sys::SignalTarget::group(child.as_raw()),
            (Some(fd), true) => sys::SignalTarget::pidfd(std::os::fd::AsFd::as_fd(fd)),
            (None, true) => sys::SignalTarget::process(child.as_raw()),
        };
        Supervisor {
            routes,
            quick,
            quick_target,
            policy,
            handled: init.handled,
            socket_signals: sys::signal_set(readiness),
            me: init.me,
            pid1: init.pid1,
            child,
            child_fd,
            single_child: config.single_child,
            cont_after_stop: config.cont_after_stop,
            warn_reaping: config.warn_reaping,
            state: State::START,
            ready: true,
            clock_zero,
            shutdown_at: None,
            ready_file,
            health,
            notify,
            proc: ProcReader::new(),
            warned_blind: false,
            counters: Counters::default(),
            oom,
            names_oom_kills: config.names_oom_kills || logging::json(),
            personality: config.name,
        }
    }
}

/// Closes the fds the app inherited and fits the health endpoint's budget to the fds left,
/// from one listing. Out of line: what changes here must not move the event loop's registers.
#[inline(never)]
fn settle_fds(health: Option<&mut Health>) {
    let (inherited, own_fds) = launch::inherited_fds();
    launch::close_inherited(&inherited);
    if let Some(health) = health {
        fit_to_fd_limit(health, own_fds);
    }
}

/// The health endpoint's connection budget, from the fds the real limit leaves once lastcall holds
/// all of its own; a warning when that is none, since the endpoint then answers nobody.
fn fit_to_fd_limit(health: &mut Health, own_fds: Option<usize>) {
    /// What lastcall opens and keeps after the listing, one each at most: the OOM counter's
    /// file, the pidfd, the spare fd of the /proc reads.
    const OPENED_LATER: usize = 3;
    let limit = sys::fd_limit();
    // The listing after the spawn counted them, so no second one lies on the start-up's path;
    // without /proc, a system call per fd. Past a few thousand the budget is the most it can be
    // whatever is open.
    let open = own_fds.map(|own| own + OPENED_LATER).unwrap_or_else(|| (0..limit.min(4096) as std::os::fd::RawFd).filter(|&fd| sys::fd_is_open(fd)).count());
    let free = usize::try_from(limit).unwrap_or(usize::MAX).saturating_sub(open);
    // Kept back: a /proc read with the spare fd given up, and the ready file's temporary file.
    if health.fit_fd_limit(free, 2) == 0 {
        warn!("the open-file limit ({limit}) leaves the health endpoint no descriptor for a connection, so it cannot answer; raise it (ulimit -n)");
    }
}

/// The command could not be started: the exit code the personality gives that (tini's is its
/// child's exit code, so `-e` maps it too).
fn exec_failed(config: &Config, e: Error) -> i32 {
    error!("{e}");
    let errno = match &e {
        Error::Exec { source, .. } => source.raw_os_error(),
        _ => None,
    };
    config.exits.start_failure_exit(config.exits.exec_failure_code(errno), true, &config.remap_exit)
}

/// catatonit's pause mode: no command; reap whatever arrives, exit on a termination signal.
fn pause(handled: &SigSet) -> i32 {
    loop {
        match sys::wait_for_signal(handled) {
            Ok((Sig::CHLD, _)) => {
                reap::reap_all(Pid::from_raw(0), |_, _| {});
            }
            Ok((sig, _)) if sig.is_termination() => return 0,
            Ok(_) => {}
            Err(e) => warn!("cannot wait for signals: {e}"),
        }
    }
}

/// What ended a wait of the event loop.
enum Woken {
    /// A signal for lastcall to act on, and its sender.
    Signal(Sig, libc::pid_t),
    /// The kernel's word that a socket of lastcall's is readable.
    Sockets,
    /// The wait's own work (`Supervisor::wait_idle`) ended with lastcall's exit code.
    Exit(i32),
    /// Nothing to act on (a timeout), or nothing more: the deadlines may have changed.
    Again,
    Failed(nix::errno::Errno),
}

impl Woken {
    /// `sockets`: whether lastcall has any; without, a signal that says a socket is readable is
    /// someone's (an fd the app set up to signal lastcall's pid) and is acted on as any other.
    #[inline(always)]
    fn from(taken: nix::Result<Option<(Sig, libc::pid_t, bool)>>, sockets: bool) -> Woken {
        match taken {
            Ok(Some((_, _, true))) if sockets => Woken::Sockets,
            Ok(Some((sig, sender, _))) => Woken::Signal(sig, sender),
            Ok(None) => Woken::Again,
            Err(e) => Woken::Failed(e),
        }
    }
}

struct Supervisor {
    routes: Routes,
    /// The idle wait's short way (`Quick`), and where it sends: the app's group, or the main
    /// child alone (its pidfd, while `child_fd` holds it). Closed when the main child is reaped.
    quick: Quick,
    quick_target: sys::SignalTarget,
    policy: Policy,
    /// The blocked signals, waited for with sigtimedwait: the loop's one wait.
    handled: SigSet,
    /// The signals the kernel raises for a readable socket (see `sys::socket_signal`).
    socket_signals: SigSet,
    me: Pid,
    pid1: bool,
    /// The main child's pid, which is also its process group id (unless `Detach::Inherit`,
    /// where only the child itself is ever signalled).
    child: Pid,
    /// A pidfd for the main child, where the kernel has them: see `app`.
    child_fd: Option<std::os::fd::OwnedFd>,
    single_child: bool,
    /// SIGCONT after each stop signal (`send_stop_signal`).
    cont_after_stop: bool,
    warn_reaping: bool,
    state: State,
    /// Whether /ready answers 200: until the machine says Unready.
    ready: bool,
    /// The timeline's zero: lastcall's start.
    clock_zero: Instant,
    /// When the first termination signal arrived (json's elapsed_ms counts from it).
    shutdown_at: Option<Instant>,
    ready_file: Option<ReadyFile>,
    health: Option<Health>,
    notify: Option<NotifyRelay>,
    proc: ProcReader,
    /// Whether lastcall has said that /proc does not show it everything (once is enough).
    warned_blind: bool,
    /// What /metrics counts.
    counters: Counters,
    /// The memory cgroup's OOM-kill counter, read when something dies of SIGKILL.
    oom: Option<OomCounter>,
    /// Whether an OOM kill is logged: always in json, in text under lastcall's own name only.
    names_oom_kills: bool,
    personality: &'static str,
}

/// How the app is addressed: see `Supervisor::app`.
#[derive(Clone, Copy)]
enum Target {
    Main,
    Group,
}

/// The earlier of two deadlines, if any.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

