//! The notify relay's filter (`lastcall::notify::filter`), which every datagram the app sends
//! passes before it goes to the service manager as lastcall's own.
//!
//! Checked: no panic; no MAINPID= and no BARRIER=1 line ever passes; what passes is the input's
//! other non-empty lines, in order, each ended by a newline; filtering twice changes nothing.
#![no_main]

use lastcall::notify::filter;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let out = filter(data);
    assert!(out.is_empty() || out.ends_with(b"\n"));
    let kept: Vec<&[u8]> = out.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
    for line in &kept {
        assert!(!line.starts_with(b"MAINPID=") && *line != b"BARRIER=1", "{line:?} passed");
    }
    let expected: Vec<&[u8]> = data
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty() && !l.starts_with(b"MAINPID=") && *l != b"BARRIER=1")
        .collect();
    assert_eq!(kept, expected);
    assert_eq!(filter(&out), out, "filtering twice changed the message");
});
