//! The app's environment: lastcall's own, passed on entry for entry, with the variables lastcall
//! sets for it (the deadlines, the notify relay's socket, `--user`'s names, the outer one's flags
//! when it steps aside). Every variable lastcall reads is read in `cli`; the app's environment is
//! built here too, once the set-up has the values only it can give (`Runtime`).
//!
//! May import: config, sys, user.

use std::borrow::Cow;
use std::ffi::{CStr, CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use crate::config::Config;
use crate::sys;
use crate::user::Credentials;

/// What only the set-up knows: the relay's socket (the app's NOTIFY_SOCKET), who the app runs as,
/// and the start-up's clock.
pub struct Runtime<'a> {
    pub notify_socket: Option<&'a str>,
    pub credentials: Option<&'a Credentials>,
    pub clock_zero_ns: u64,
}

/// The app's environment as `KEY=VALUE` C strings: the inherited entries borrowed as they are
/// (they live as long as lastcall), only the variables lastcall sets built.
pub fn child_environment(config: &Config, runtime: Runtime) -> Vec<Cow<'static, CStr>> {
    let overrides = overrides(config, runtime);
    let overridden = |entry: sys::EnvEntry| overrides.iter().any(|(name, _)| entry.is_named(name.as_bytes()));
    let mut env: Vec<Cow<'static, CStr>> =
        sys::environment().filter(|&entry| !overridden(entry)).map(|entry| Cow::Borrowed(entry.whole())).collect();
    env.extend(overrides.iter().map(|(k, v)| Cow::Owned(env_entry(k.as_bytes(), v.as_bytes()))));
    env
}

/// The variables lastcall sets (or replaces) in the app's environment.
fn overrides(config: &Config, runtime: Runtime) -> Vec<(String, OsString)> {
    // 0 means none (for the grace: never SIGKILL), so a duration under a millisecond reads 1.
    let millis = |d: Duration| OsString::from(d.as_millis().max(u128::from(!d.is_zero())).to_string());
    let mut env = vec![];
    if !config.nested && config.deadlines_in_env {
        env.push(("LASTCALL_PRE_STOP_MS".to_string(), millis(config.pre_stop)));
        env.push(("LASTCALL_GRACE_MS".to_string(), millis(config.grace.unwrap_or_default())));
        env.push(("LASTCALL_CLOCK_ZERO_NS".to_string(), runtime.clock_zero_ns.to_string().into()));
    }
    if let Some(socket) = runtime.notify_socket {
        env.push(("NOTIFY_SOCKET".into(), socket.into()));
    }
    if let Some(c) = runtime.credentials {
        env.extend(c.env(|name| config.inherited.user_names_set.contains(&name)));
    }
    // Empty unless stepping aside: the outer's flags, as the inner one's variables.
    env.extend(config.flags.iter().filter(|_| config.nested).map(|(name, value)| (name.to_string(), OsString::from(value))));
    env
}

/// `KEY=VALUE` as a C string, built in place: one allocation, with room for the NUL.
fn env_entry(key: &[u8], value: &[u8]) -> CString {
    let mut entry = Vec::with_capacity(key.len() + value.len() + 2);
    entry.extend_from_slice(key);
    entry.push(b'=');
    entry.extend_from_slice(value);
    CString::new(entry).unwrap_or_default()
}
