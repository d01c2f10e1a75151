//! lastcall: a tiny static PID-1 init and signal forwarder for containers.
//!
//! May import: the library: cli, error, logging, personality, probe, supervisor, sys.
#![deny(unsafe_code)]

use lastcall::cli::{self, Parsed};
use lastcall::personality::{Ending, Personality};
use lastcall::{error, logging, probe, supervisor, sys};

/// Start-up's allocations come from an arena in .bss, not from musl's malloc, which maps and
/// unmaps pages for them one by one (see `sys::Arena`).
#[global_allocator]
static ALLOCATOR: sys::Arena<{ 64 * 1024 }> = sys::Arena::new();

fn main() {
    // Before anything else, so that a signal landing during start-up waits for the event loop
    // instead of killing lastcall or being lost. The mask it replaces is the app's.
    let inherited_mask = sys::block_handled();
    // Under a peer's name, lastcall's own failures exit as that peer's do.
    let personality = Personality::of(&std::env::args_os().next().unwrap_or_default());

    let variables = cli::OptionVariables::of_this_process();
    let var = |name: &str| variables.get(name);
    let code = match cli::parse_all(std::env::args_os(), var, variables.names()) {
        Ok(Parsed::Print(text)) => {
            if personality.texts_to_stderr {
                eprint!("{text}");
            } else {
                print!("{text}");
            }
            Ending::Code(0)
        }
        Ok(Parsed::Probe(config)) => {
            // A probe is a short client, not an init: it dies of INT and TERM as curl does, so
            // it runs with the mask it was started with (a signal that came meanwhile, pending,
            // ends it here). Only this path pays the system call.
            if let Ok(mask) = &inherited_mask {
                let _ = sys::set_signal_mask(libc::SIG_SETMASK, mask);
            }
            Ending::Code(probe::probe(&config))
        }
        Ok(Parsed::Run(config)) => {
            logging::init(config.log_level, config.log_format);
            let result = inherited_mask
                .map_err(|e| error::Error::setup("cannot block signals", e))
                .and_then(|mask| supervisor::run(config, mask));
            result.unwrap_or_else(|e| {
                log::error!("{e}");
                Ending::Code(e.exit_code_as(personality))
            })
        }
        Err(e) => {
            // json asked for: the error is one JSON line too, without the hints for a person.
            if cli::asked_log_format(std::env::args_os(), var) == logging::Format::Json {
                logging::init(log::LevelFilter::Error, logging::Format::Json);
                log::error!("{e}");
            } else {
                eprint!("{}", cli::usage_error_text(personality, &e));
            }
            Ending::Code(e.exit_code_as(personality))
        }
    };
    error::exit_like(code);
}
