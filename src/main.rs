//! lastcall: a tiny static PID-1 init and signal forwarder for containers.
#![deny(unsafe_code)]

use lastcall::cli::{self, Parsed};
use lastcall::personality::Personality;
use lastcall::error::Ending;
use lastcall::{error, logging, probe, signals, supervisor};

fn main() {
    // Before anything else, so that a signal landing during start-up waits for the event loop
    // instead of killing lastcall or being lost. The mask it replaces is the app's.
    let inherited_mask = signals::block_handled();
    // Under a peer's name, lastcall's own failures exit as that peer's do.
    let personality = Personality::of(&std::env::args_os().next().unwrap_or_default());

    let code = match cli::parse(std::env::args_os(), |name| std::env::var_os(name)) {
        Ok(Parsed::Print(text)) => {
            print!("{text}");
            Ending::Code(0)
        }
        Ok(Parsed::Probe(config)) => Ending::Code(probe::probe(&config)),
        Ok(Parsed::Run(config)) => {
            logging::init(config.log_level);
            let result = inherited_mask
                .map_err(|e| error::Error::setup("cannot block signals", e))
                .and_then(|mask| supervisor::run(config, mask));
            result.unwrap_or_else(|e| {
                log::error!("{e}");
                Ending::Code(e.exit_code_as(personality))
            })
        }
        Err(e) => {
            eprintln!("lastcall: {e}\n{}\n{}", cli::USAGE_LINE, cli::HINT_LINE);
            Ending::Code(e.exit_code_as(personality))
        }
    };
    error::exit_like(code);
}
