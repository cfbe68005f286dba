//! The README's way of depending on `enso` from outside this workspace:
//! a crate made in a temporary directory, depending on `enso-lib` by path,
//! built offline and run. Skipped (with the reason recorded) if cargo
//! cannot be run; with CI=true that fails instead.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest the build and run may take (a first build compiles `enso` and
/// its dependencies).
const LIMIT: Duration = Duration::from_secs(600);

const MAIN: &str = r#"
use std::net::Ipv4Addr;

fn main() {
    let rule = enso::FlowRule {
        dst_ip: u32::from(Ipv4Addr::new(10, 1, 0, 1)),
        dst_port: 5000,
        protocol: 17,
        ..Default::default()
    };
    assert_eq!(rule.dst_ip, 0x0a01_0001);
    let mut frame = [0u8; 64];
    frame[enso::DEFAULT_RTT_OFFSET as usize + 3] = 7;
    let rtt = enso::rtt_ns(&frame, enso::DEFAULT_RTT_OFFSET as usize, enso::TsFormat::Enso);
    let dir = std::env::temp_dir();
    let err = enso::Device::open_in(&dir, "no-such-device", enso::DeviceOptions::default())
        .expect_err("no such device");
    println!("outside: offset {} rtt {:?} open: {}", enso::DEFAULT_RTT_OFFSET, rtt, !err.to_string().is_empty());
}
"#;

#[test]
fn a_crate_outside_the_workspace_depends_on_enso_by_path() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    match Command::new(&cargo).arg("--version").output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => return test_skips::missing(format!("{cargo} --version failed: {:?}", o.status)),
        Err(e) => return test_skips::missing(format!("cannot run {cargo}: {e}")),
    }
    let lib = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let krate = tmp.path().join("uses-enso");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    // The README's line, with this checkout's path; its own [workspace]
    // keeps it out of any workspace above the temporary directory.
    let toml = format!(
        "[package]\nname = \"uses-enso\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nenso = {{ path = {:?} }}\n\n[workspace]\n",
        lib.display().to_string()
    );
    std::fs::write(krate.join("Cargo.toml"), toml).unwrap();
    std::fs::write(krate.join("src/main.rs"), MAIN).unwrap();
    // The workspace's lock file: offline, the same versions it built with.
    std::fs::copy(lib.join("../Cargo.lock"), krate.join("Cargo.lock")).unwrap();
    // A target directory of its own (a build of this test's cargo holds
    // the workspace's): beside the workspace's to be reused across runs,
    // else in the temporary directory.
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(t) => Path::new(&t).join("outside-crate"),
        None => tmp.path().join("target"),
    };
    let mut child = Command::new(&cargo)
        .args(["run", "--offline", "--quiet"])
        .current_dir(&krate)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cargo starts");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("building and running the outside crate took over {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cargo run failed:\n{stdout}\n{stderr}"
    );
    assert_eq!(
        stdout.trim(),
        "outside: offset 18 rtt Some(35) open: true",
        "{stderr}"
    );
}
