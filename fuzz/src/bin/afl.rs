//! The AFL++ entry point: `enso-fuzz-afl TARGET`, run by `afl-fuzz` (see
//! `fuzz/run.sh`), feeds each input AFL++ makes to that target's harness.
//! Built only by `cargo afl build --features afl`.

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let Some(target) = enso_fuzz::target(&name) else {
        let names: Vec<_> = enso_fuzz::TARGETS.iter().map(|t| t.name).collect();
        eprintln!("usage: enso-fuzz-afl TARGET (one of {})", names.join(", "));
        std::process::exit(2);
    };
    let run = target.run;
    afl::fuzz!(|data: &[u8]| run(data));
}
