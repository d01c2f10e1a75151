//! The command line and the environment, as `lastcall::cli::parse` gets them: the input is the
//! arguments (program name first) separated by NUL, then a 0xFF byte, then NAME=VALUE variables
//! separated by NUL. Bytes need not be UTF-8, as on a real command line.
//!
//! Checked: no panic; a usage error is one line that says what was wrong.
#![no_main]

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use lastcall::cli::parse;
use lastcall::error::Error;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (args, env) = match data.iter().position(|&b| b == 0xff) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let args: Vec<OsString> = args.split(|&b| b == 0).map(|a| OsStr::from_bytes(a).to_os_string()).collect();
    let vars: Vec<(&[u8], &[u8])> = env
        .split(|&b| b == 0)
        .filter_map(|kv| kv.iter().position(|&b| b == b'=').map(|i| (&kv[..i], &kv[i + 1..])))
        .collect();
    let lookup = |name: &str| vars.iter().find(|(k, _)| *k == name.as_bytes()).map(|(_, v)| OsStr::from_bytes(v).to_os_string());
    if let Err(e) = parse(args, lookup) {
        let text = e.to_string();
        if let Error::Usage(_) = e {
            assert!(!text.contains('\n') && !text.contains('\r'), "a usage error of more than one line: {text:?}");
            assert!(!text.is_empty(), "an empty usage error");
        }
    }
});
