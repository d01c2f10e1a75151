//! The `--user` database parser, bounded in time and memory whatever the files hold.

#[allow(unused_imports)]
use super::*;
