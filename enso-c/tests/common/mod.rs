//! Helpers of the integration tests: the C compiler, and the static
//! library cargo built for this test run.

#![allow(dead_code)] // each test uses a part

use std::path::{Path, PathBuf};
use std::process::Command;

/// The crate's directory.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The C compiler (`$CC`, or `cc`). Without one the test is skipped with
/// the reason recorded, unless `CI=true`, where it fails.
pub fn c_compiler() -> Option<String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    match Command::new(&cc).arg("--version").output() {
        Ok(o) if o.status.success() => Some(cc),
        _ => {
            test_skips::missing(format!(
                "no C compiler: `{cc} --version` failed; install cc (or set CC)"
            ));
            None
        }
    }
}

/// `libenso_c.a` as cargo built it for this run. Building the tests
/// builds every crate type of the library into `target/<profile>/deps/`,
/// next to the test executable (only `cargo build` copies it up to
/// `target/<profile>/`, where a copy may be older than this run's).
pub fn static_lib() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe
        .parent()
        .expect("the test runs from target/<profile>/deps");
    let lib = deps.join("libenso_c.a");
    assert!(
        lib.is_file(),
        "{} not found: the crate's staticlib should be built with its tests",
        lib.display()
    );
    lib
}

/// Compiles and links C file `src` into executable `out` against the
/// static library, with every warning an error.
pub fn build_c(cc: &str, src: &Path, out: &Path) {
    let o = Command::new(cc)
        .args([
            "-std=c11",
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
        ])
        .arg(src)
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg(static_lib())
        // What the Rust standard library needs from the system.
        .args(["-lpthread", "-ldl", "-lm"])
        .arg("-o")
        .arg(out)
        .output()
        .expect("running the C compiler");
    assert!(
        o.status.success(),
        "{cc} {} failed:\n{}{}",
        src.display(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
