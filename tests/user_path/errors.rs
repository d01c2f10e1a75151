//! Typos and bad values: caught, with a suggestion, in one line.

#[allow(unused_imports)]
use super::*;
