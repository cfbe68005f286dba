//! The last test binary of `cargo test`: lists the skips recorded by the
//! tests of this run, one line each (see the crate's documentation). A
//! binary without the test harness, so that cargo shows what it prints.

fn main() {
    // `cargo test -- --list` asks for the tests' names: there are none.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let Some(root) = test_skips::records_root() else {
        println!("skipped tests: no executable path, no records");
        return;
    };
    let run = test_skips::run_id();
    let skips = test_skips::read_run(&root, &run);
    print!("\n{}", test_skips::summary(&skips));
    test_skips::clean(&root, &run);
}
