//! The hosts suite's list of tests: `Case`, and `cases!`, which writes each name once. A module
//! of its own so that readme_blocks, which compiles the hosts' modules for their dockerd, gets
//! the same definitions.

/// One test: its name and what it runs against the hosts.
pub struct Case {
    pub name: &'static str,
    pub run: fn(&mut crate::support::Hosts),
}

/// A file's cases, each written once: `cases![a, b]` runs the function `a` as the test "a", then `b`.
macro_rules! cases {
    ($($test:ident),* $(,)?) => {
        &[$(crate::Case { name: stringify!($test), run: $test }),*]
    };
}
