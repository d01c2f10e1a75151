//! Durations and signal names, as options and variables spell them (`cli::parse_duration`,
//! `Sig::parse`).
//!
//! Checked: no panic; a duration is never above the maximum, and reads 0 only when every digit
//! of it is 0 (a non-zero value that rounds to 0 would mean "never" for the grace); a signal
//! that parses names a number from 1 to 64 (0 only where allowed) whose own name reads back to
//! that number, and its spelling has no sign or space inside.
#![no_main]

use lastcall::cli::{parse_duration, MAX_DURATION};
use lastcall::signals::Sig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(d) = parse_duration(text) {
        assert!(d <= MAX_DURATION, "{text:?} gave {d:?}");
        if d.is_zero() {
            let mantissas = text.split(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E');
            let nonzero = mantissas.flat_map(|m| m.split(['e', 'E']).next()).any(|m| m.bytes().any(|b| matches!(b, b'1'..=b'9')));
            assert!(!nonzero, "{text:?} is not 0 but read as 0");
        }
    }
    for allow_zero in [false, true] {
        if let Ok(sig) = Sig::parse(text, allow_zero) {
            assert!((1..=64).contains(&sig.0) || (allow_zero && sig.0 == 0), "{text:?} gave {sig:?}");
            if let Some(name) = sig.name() {
                assert_eq!(Sig::parse(&name, false), Ok(sig), "{name} does not read back");
            }
            let inner = text.trim();
            assert!(!inner.contains(char::is_whitespace), "{text:?} was accepted with a space inside");
            assert!(!inner.contains("+-") && !inner.contains("-+") && !inner.contains("++") && !inner.contains("--") && !inner.starts_with('+'), "{text:?}: a sign where none belongs");
        }
    }
});
