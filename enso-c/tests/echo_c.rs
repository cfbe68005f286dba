//! The C example `examples/echo.c`, built with `cc` against the static
//! library of this build, serving a standalone device: an emulated NIC in
//! this process listening on its control socket, whose port 0 is the
//! built-in generator. The C process attaches through the socket; the
//! generator checks every frame that comes back.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nic_emu::{DeviceConfig, GeneratorConfig, Nic, RunOptions, WireConfig};

mod common;

/// Frames the generator sends, at most 64 in flight.
const FRAMES: u64 = 20_000;

#[test]
fn the_c_echo_server_returns_every_frame_with_its_echo_byte_incremented() {
    run_echo("echo", "unsent");
}

#[test]
fn the_c_socket_echo_server_returns_every_frame_with_its_echo_byte_incremented() {
    run_echo("socket_echo", "");
}

/// Runs C example `example` against a generator; `unsent` names its JSON
/// field of sends left incomplete, if it has one.
fn run_echo(example: &str, unsent_field: &str) {
    let Some(cc) = common::c_compiler() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let exe = tmp.path().join(example);
    common::build_c(
        &cc,
        &common::crate_dir().join(format!("examples/{example}.c")),
        &exe,
    );

    // Paused: no frame leaves before the echo server's pipe is there (the
    // NIC would drop it as matching nothing).
    let generator = GeneratorConfig {
        count: Some(FRAMES),
        max_in_flight: Some(64),
        paused: true,
        ..Default::default()
    };
    let name = format!("c-{example}-{}", std::process::id());
    let mut cfg = DeviceConfig::new(&name, WireConfig::Generator(generator));
    cfg.dir = tmp.path().into();
    let nic = Nic::start(
        cfg,
        RunOptions {
            listen: true,
            ..Default::default()
        },
    )
    .expect("device starts");

    let mut child = Command::new(&exe)
        .arg(&name)
        .arg(tmp.path())
        .arg("2")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the C echo starts");
    let started = Instant::now();
    let fail = |child: &mut std::process::Child, why: &str| -> ! {
        let _ = child.kill();
        let _ = child.wait();
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        panic!("{why}; its stderr:\n{err}");
    };
    while nic.stats().fallback_pipes < 1 {
        if child.try_wait().unwrap().is_some() {
            fail(&mut child, "the C echo exited before allocating its pipe");
        }
        if started.elapsed() > Duration::from_secs(20) {
            fail(&mut child, "the C echo allocated no pipe within 20 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    nic.with_engine(|e| e.set_generators_paused(false));

    // It runs 2 s, then waits at most 2 s for its sends to complete.
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            fail(&mut child, "the C echo did not exit within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "echo failed: {stdout}{stderr}");
    let line = stdout.lines().last().unwrap_or("");
    let json: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
    let field = |k: &str| {
        json[k]
            .as_u64()
            .unwrap_or_else(|| panic!("no {k} in {line}"))
    };
    let (frames, echoed, other) = (field("frames"), field("echoed"), field("other"));
    let unsent = if unsent_field.is_empty() {
        0
    } else {
        field(unsent_field)
    };

    let stats = nic.stop();
    let g = stats.generator(0).expect("port 0 is the generator");
    eprintln!("echo: {line}\ngenerator: {g:?}");
    assert!(frames > 0, "the C echo received nothing: {line}");
    assert!(frames <= g.sent && g.sent <= FRAMES, "{line} / {g:?}");
    // Every frame was a test frame, and went back with its echo byte
    // incremented (the generator verifies every byte of it).
    assert_eq!((echoed, other, unsent), (frames, 0, 0), "{line}");
    assert_eq!((g.corrupt, g.duplicate, g.foreign), (0, 0, 0), "{g:?}");
    assert_eq!(g.returned, frames, "frames echoed vs verified back: {g:?}");
}
