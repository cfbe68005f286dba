//! Every input a fuzzer once found a problem with, replayed through its
//! target's harness. Inputs live in `fuzz/regressions/TARGET/NAME`; each
//! has a test here that names what it found. An input that shows a bug
//! not fixed yet gets an `#[ignore]`d test naming the bug.

use std::path::Path;

fn replay(target: &str, name: &str) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("regressions")
        .join(target)
        .join(name);
    let data = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let t = enso_fuzz::target(target).expect("target");
    (t.run)(&data);
}

/// The steering harness expected the ports of an IPv4 frame of another
/// protocol than TCP or UDP in its steering key; the NIC reads ports of
/// TCP and UDP only (found by the first AFL++ run: a harness bug).
#[test]
fn steering_frame_of_another_protocol_has_no_ports() {
    replay("steering", "non-l4-protocol-has-no-ports");
}

/// Every file under `regressions/` replays cleanly (those with a test of
/// their own above, and any added since).
#[test]
fn all_regression_inputs_replay() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    for t in enso_fuzz::TARGETS {
        let Ok(dir) = std::fs::read_dir(root.join(t.name)) else {
            continue;
        };
        for e in dir {
            let data = std::fs::read(e.expect("entry").path()).expect("input");
            (t.run)(&data);
        }
    }
}
