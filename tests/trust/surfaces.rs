//! /metrics, the probe, the text log and the misspelt-variable check against hostile input.

#[allow(unused_imports)]
use super::*;
