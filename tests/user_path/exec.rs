//! What running the command says and does: directories, scripts without #!, the working directory.

#[allow(unused_imports)]
use super::*;
