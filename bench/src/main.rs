fn main() { eprintln!("bench: no experiments yet"); std::process::exit(2); }
