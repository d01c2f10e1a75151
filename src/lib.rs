//! lastcall: a tiny static PID-1 init and signal forwarder for containers.
//!
//! The binary (`main.rs`) is a thin shell over this library; the modules are public so that the
//! fuzz targets and the benchmark can reach the parsers and the state machine directly.
#![deny(unsafe_code)]

pub mod child;
pub mod cli;
pub mod error;
pub mod health;
pub mod logging;
pub mod machine;
pub mod notify;
pub mod personality;
pub mod probe;
pub mod ready;
pub mod reap;
pub mod signals;
pub mod supervisor;
pub mod sys;
