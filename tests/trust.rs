//! lastcall at its trust boundaries, each with real processes: hostile values, a
//! hostile local user next to the notify relay and the ready file, a log pipe nobody reads, and
//! floods of health clients. One file per boundary under tests/trust/; what they share is here.

mod common;

#[path = "trust/floods.rs"]
mod floods;
#[path = "trust/log_pipe.rs"]
mod log_pipe;
#[path = "trust/notify.rs"]
mod notify;
#[path = "trust/ready_file.rs"]
mod ready_file;
#[path = "trust/step_aside.rs"]
mod step_aside;
#[path = "trust/surfaces.rs"]
mod surfaces;
#[path = "trust/userdb.rs"]
mod userdb;
#[path = "trust/values.rs"]
mod values;

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const SEC: Duration = Duration::from_secs(1);

