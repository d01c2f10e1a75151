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

    let code = match cli::parse(std::env::args_os(), |name| std::env::var_os(name)) {
        Ok(Parsed::Print(text)) => {
            print!("{text}");
            Ending::Code(0)
        }
        Ok(Parsed::Probe(config)) => Ending::Code(probe::probe(&config)),
        Ok(Parsed::Run(config)) => {
            logging::init(config.log_level);
            let personality = config.personality;
            let result = inherited_mask
                .map_err(|e| error::Error::setup("cannot block signals", e))
                .and_then(|mask| supervisor::run(config, mask));
            result.unwrap_or_else(|e| {
                log::error!("{e}");
                Ending::Code(match e {
                    error::Error::Setup { .. } => personality.setup_exit,
                    e => e.exit_code(),
                })
            })
        }
        Err(e) => {
            eprintln!("lastcall: {e}\n{}\n{}", cli::USAGE_LINE, cli::HINT_LINE);
            Ending::Code(match e {
                // Under a peer's name, a usage error exits as that peer's does.
                error::Error::Usage(_) => Personality::of(&std::env::args_os().next().unwrap_or_default()).usage_exit,
                e => e.exit_code(),
            })
        }
    };
    error::exit_like(code);
}
