//! lastcall: a tiny static PID-1 init and signal forwarder for containers.
//!
//! The binary (`main.rs`) is a thin shell over this library; the modules are public so that the
//! fuzz targets and the benchmark can reach the parsers and the state machine directly.
//!
//! May import: nothing: it declares the modules.
#![deny(unsafe_code)]

pub mod cli;
pub mod config;
pub mod error;
pub mod health;
pub mod inner_lastcall;
pub mod launch;
pub mod logging;
pub mod machine;
pub mod metrics;
pub mod notify;
pub mod oom;
pub mod personality;
pub mod probe;
pub mod procfs;
pub mod ready_file;
pub mod reap;
pub mod signals;
pub mod supervisor;
pub mod sys;
pub mod user;

#[cfg(test)]
mod layering;
