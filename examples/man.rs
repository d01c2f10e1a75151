//! Prints lastcall(1), made from the option table: `cargo run --example man -- VERSION DATE`
//! (scripts/package does, for the packages).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [version, date] = args.as_slice() else {
        eprintln!("usage: man VERSION YYYY-MM-DD");
        std::process::exit(2);
    };
    print!("{}", lastcall::cli::man::page(version, date));
}
