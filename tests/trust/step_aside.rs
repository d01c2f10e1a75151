//! Stepping aside for an inner lastcall never weakens what the outer was asked to do.

#[allow(unused_imports)]
use super::*;
