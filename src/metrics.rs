//! The counters behind `GET /metrics`, and their rendering in Prometheus' text exposition
//! format 0.0.4.
//!
//! The loop keeps the counters as plain integers in fixed arrays indexed by signal number: an
//! increment costs no allocation and no system call. Everything else (the phase, the shutdown's
//! age, the app's exit) is read off the supervisor's state when a scrape asks, and only then is
//! text built.
//!
//! May import: logging (`SecondsValue`), machine (`Phase`'s names), signals.

use std::fmt::Write;
use std::time::Duration;

use crate::logging::SecondsValue;
use crate::machine::Phase;
use crate::signals::{Sig, MAX_SIGNAL};

const SLOTS: usize = MAX_SIGNAL as usize + 1;

/// What the loop counts as it goes.
#[derive(Clone, Debug)]
pub struct Counters {
    pub received: [u64; SLOTS],
    pub forwarded: [u64; SLOTS],
    pub orphans_reaped: u64,
    pub oom_kills: u64,
}

impl Default for Counters {
    fn default() -> Counters {
        Counters { received: [0; SLOTS], forwarded: [0; SLOTS], orphans_reaped: 0, oom_kills: 0 }
    }
}

/// One more for `sig` (a number outside the table is not counted rather than a panic).
#[inline(always)]
pub fn count(table: &mut [u64; SLOTS], sig: Sig) {
    add(table, sig, 1);
}

/// `n` more for `sig`, as `count`.
#[inline(always)]
pub fn add(table: &mut [u64; SLOTS], sig: Sig, n: u64) {
    if let Some(slot) = table.get_mut(sig.0 as usize) {
        *slot = slot.wrapping_add(n);
    }
}

/// Everything a scrape shows, gathered when one is answered.
pub struct Snapshot<'a> {
    pub counters: &'a Counters,
    pub version: &'a str,
    pub personality: &'a str,
    /// One of `Phase::NAMES`.
    pub phase: &'a str,
    /// Since the first termination signal, if one came.
    pub shutdown: Option<Duration>,
    /// The app's exit code (128+N for signal N) and the signal, once it is reaped.
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    pub notify_relayed: u64,
    pub notify_refused: u64,
    pub health_evicted: u64,
    pub log_lines_dropped: u64,
}

impl Snapshot<'_> {
    /// The exposition text, appended to `out`.
    pub fn render(&self, out: &mut String) {
        let c = self.counters;
        family(out, "lastcall_info", "gauge", "lastcall's version and the personality it runs as.");
        let _ = writeln!(
            out,
            "lastcall_info{{version=\"{}\",personality=\"{}\"}} 1",
            label(self.version),
            label(self.personality)
        );
        family(out, "lastcall_phase", "gauge", "The shutdown's phase: 1 for the current one.");
        for phase in Phase::NAMES {
            let _ = writeln!(out, "lastcall_phase{{phase=\"{phase}\"}} {}", u8::from(phase == self.phase));
        }
        for (name, help, table) in [
            ("lastcall_signals_received_total", "Signals lastcall received, by signal.", &c.received),
            ("lastcall_signals_forwarded_total", "Signals lastcall sent on to the app, by signal.", &c.forwarded),
        ] {
            family(out, name, "counter", help);
            for (n, &count) in table.iter().enumerate().filter(|&(_, &count)| count > 0) {
                let sig = Sig(n as i32);
                let _ = writeln!(out, "{name}{{signal=\"{sig}\"}} {count}");
            }
        }
        let simple: [(&str, &str, &str, Option<String>); 7] = [
            ("lastcall_orphans_reaped_total", "counter", "Processes other than the app that lastcall reaped.", Some(c.orphans_reaped.to_string())),
            ("lastcall_oom_kills_total", "counter", "OOM kills counted in lastcall's memory cgroup since it started.", Some(c.oom_kills.to_string())),
            (
                "lastcall_shutdown_seconds",
                "gauge",
                "Seconds since the first termination signal.",
                self.shutdown.map(|d| SecondsValue(d).to_string()),
            ),
            ("lastcall_app_exit_code", "gauge", "The app's exit code (128+N when killed by signal N).", self.exit_code.map(|n| n.to_string())),
            ("lastcall_app_exit_signal", "gauge", "The signal that killed the app.", self.exit_signal.map(|n| n.to_string())),
            ("lastcall_health_connections_evicted_total", "counter", "Health connections dropped to make room for new ones.", Some(self.health_evicted.to_string())),
            ("lastcall_log_lines_dropped_total", "counter", "Log lines dropped because stderr was full.", Some(self.log_lines_dropped.to_string())),
        ];
        for (name, kind, help, value) in simple {
            if let Some(value) = value {
                family(out, name, kind, help);
                let _ = writeln!(out, "{name} {value}");
            }
        }
        family(out, "lastcall_notify_messages_total", "counter", "sd_notify messages from the app: relayed, or refused as not the service's.");
        let _ = writeln!(out, "lastcall_notify_messages_total{{result=\"relayed\"}} {}", self.notify_relayed);
        let _ = writeln!(out, "lastcall_notify_messages_total{{result=\"refused\"}} {}", self.notify_refused);
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A label value as the format wants it: `\`, `"` and newlines escaped.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(counters: &Counters) -> String {
        let mut out = String::new();
        Snapshot {
            counters,
            version: "0.1.0",
            personality: "lastcall",
            phase: Phase::Draining { until: None }.name(),
            shutdown: Some(Duration::from_millis(1500)),
            exit_code: None,
            exit_signal: None,
            notify_relayed: 2,
            notify_refused: 1,
            health_evicted: 0,
            log_lines_dropped: 0,
        }
        .render(&mut out);
        out
    }

    /// One series for each phase: the names are unique, and the current one alone is 1.
    #[test]
    fn a_series_for_each_phase() {
        let text = snapshot(&Counters::default());
        for name in Phase::NAMES {
            let series = format!("lastcall_phase{{phase=\"{name}\"}} ");
            assert_eq!(text.matches(&series).count(), 1, "{name}: {text}");
        }
        assert_eq!(text.matches("lastcall_phase{").count(), Phase::NAMES.len(), "{text}");
        assert_eq!(text.lines().filter(|l| l.starts_with("lastcall_phase{") && l.ends_with(" 1")).count(), 1, "{text}");
    }

    #[test]
    fn renders_the_counts() {
        let mut c = Counters::default();
        count(&mut c.received, Sig::TERM);
        count(&mut c.received, Sig::TERM);
        count(&mut c.forwarded, Sig::TERM);
        count(&mut c.received, Sig(200));
        let text = snapshot(&c);
        assert!(text.contains("lastcall_signals_received_total{signal=\"SIGTERM\"} 2\n"), "{text}");
        assert!(text.contains("lastcall_signals_forwarded_total{signal=\"SIGTERM\"} 1\n"), "{text}");
        assert!(text.contains("lastcall_phase{phase=\"draining\"} 1\nlastcall_phase{phase=\"killing\"} 0\n"), "{text}");
        assert!(text.contains("lastcall_shutdown_seconds 1.500\n"), "{text}");
        assert!(!text.contains("lastcall_app_exit_code"), "absent until known: {text}");
        assert!(text.contains("lastcall_notify_messages_total{result=\"refused\"} 1\n"), "{text}");
    }
}
