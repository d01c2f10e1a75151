//! lastcall: a tiny static PID-1 init and signal forwarder for containers.
#![deny(unsafe_code)]

use lastcall::cli::{self, Parsed};
use lastcall::personality::Personality;
use lastcall::{error, logging, probe, signals, supervisor};

fn main() {
    // Before anything else, so that a signal landing during start-up waits for the event loop
    // instead of killing lastcall or being lost.
    let blocked = signals::block_handled();

    let code = match cli::parse(std::env::args_os(), |name| std::env::var_os(name)) {
        Ok(Parsed::Print(text)) => {
            print!("{text}");
            0
        }
        Ok(Parsed::Probe(config)) => probe::probe(&config),
        Ok(Parsed::Run(config)) => {
            logging::init(config.log_level);
            let result = blocked
                .map_err(|e| error::Error::setup("cannot block signals", e))
                .and_then(|()| supervisor::run(config));
            match result {
                Ok(code) => code,
                Err(e) => {
                    log::error!("{e}");
                    e.exit_code()
                }
            }
        }
        Err(e) => {
            eprintln!("lastcall: {e}\n{}\n{}", cli::USAGE_LINE, cli::HINT_LINE);
            match e {
                // Under a peer's name, a usage error exits as that peer's does.
                error::Error::Usage(_) => Personality::of(&std::env::args_os().next().unwrap_or_default()).usage_exit,
                e => e.exit_code(),
            }
        }
    };
    std::process::exit(code);
}
