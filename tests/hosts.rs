//! lastcall under the real hosts it is made for: a Docker engine (as `--init` and as ENTRYPOINT),
//! Compose, Podman, and systemd 252 booted in systemd-nspawn. Each test drives the real host's
//! own commands (`docker stop`, `systemctl stop`, ...) and checks what a user would see.
//!
//! Its own harness (`harness = false` in Cargo.toml): the hosts are started once, the tests run
//! one after another against them (one daemon, one booted container), and every host is torn
//! down at the end even when tests fail: containers removed, dockerd stopped and its netns
//! mount unmounted, the nspawn container powered off and its cgroups removed. A run that was
//! killed outright is cleaned up by the next one (stale pids are recorded under the cache).
//!
//! Needs root and what scripts/setup-test-machine installs (docker.io, docker-compose, podman,
//! systemd-container, debootstrap, busybox-static). Cached under target/hosts-cache: the Debian
//! root (debootstrap, about a minute the first time), and dockerd's data root with the images.
//!
//! `cargo test --test hosts [FILTER...]` runs the tests whose names contain a filter;
//! `--list` lists them. LASTCALL_HOSTS_SKIP=1 skips the whole suite, loudly (for a machine
//! without root or these packages; CI never sets it).

mod common;

#[macro_use]
#[path = "hosts/cases.rs"]
mod cases;
#[path = "hosts/docker.rs"]
mod docker;
#[path = "hosts/others.rs"]
mod others;
#[path = "hosts/support.rs"]
mod support;
#[path = "hosts/systemd.rs"]
mod systemd;

use std::io::Write;
use std::panic::{self, AssertUnwindSafe};
use std::time::Instant;

use support::Hosts;

pub use cases::Case;

/// Every file's cases, in the order they run.
const CASES: &[&[Case]] = &[
    docker::lifecycle::CASES,
    docker::probes::CASES,
    docker::terminal::CASES,
    docker::apps::CASES,
    docker::packages::CASES,
    others::CASES,
    systemd::CASES,
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let cases: Vec<&Case> = CASES
        .iter()
        .flat_map(|file| file.iter())
        .filter(|c| filters.is_empty() || filters.iter().any(|f| c.name.contains(f.as_str())))
        .collect();
    if args.iter().any(|a| a == "--list") {
        for case in &cases {
            println!("{}: test", case.name);
        }
        return;
    }
    if cases.is_empty() {
        return;
    }
    if std::env::var_os("LASTCALL_HOSTS_SKIP").is_some_and(|v| v == "1") {
        println!("\nrunning 0 tests: LASTCALL_HOSTS_SKIP=1 skips all {} real-host tests\n", cases.len());
        return;
    }
    println!("\nrunning {} tests", cases.len());
    let started = Instant::now();
    let mut failed = Vec::new();
    {
        let mut hosts = Hosts::new();
        for case in &cases {
            let t = Instant::now();
            print!("test {} ... ", case.name);
            let _ = std::io::stdout().flush();
            let result = panic::catch_unwind(AssertUnwindSafe(|| (case.run)(&mut hosts)));
            let took = t.elapsed().as_secs_f64();
            match result {
                Ok(()) => println!("ok ({took:.1}s)"),
                Err(_) => {
                    println!("FAILED ({took:.1}s)");
                    failed.push(case.name);
                }
            }
        }
        // Dropping `hosts` tears every host down.
    }
    let passed = cases.len() - failed.len();
    let took = started.elapsed().as_secs_f64();
    if failed.is_empty() {
        println!("\ntest result: ok. {passed} passed; 0 failed; finished in {took:.1}s\n");
    } else {
        println!("\nfailures:\n    {}", failed.join("\n    "));
        println!("\ntest result: FAILED. {passed} passed; {} failed; finished in {took:.1}s\n", failed.len());
        std::process::exit(101);
    }
}
