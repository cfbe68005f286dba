//! An idle NIC parks and an idle application waits, and neither loses a
//! frame for it: the generator's schedule wakes the engine, the engine's
//! notifications wake the application ([`Device::wait`]), and the
//! application's register writes wake a parked engine.

use std::time::{Duration, Instant};

use enso::{Device, DeviceOptions};
use enso_tests::{echo_ready, generator_device};
use nic_emu::{GeneratorConfig, Nic, RunOptions, VerifyLevel};

fn opts() -> DeviceOptions {
    DeviceOptions {
        pipes: 1,
        tx_pipes: 0,
        ..Default::default()
    }
}

/// Frames of the paced generator; the last `DELAYED` are echoed only
/// after the application has slept, long after the engine parked.
const FRAMES: u64 = 60;
const DELAYED: u64 = 5;

#[test]
fn a_slow_generator_an_engine_that_parks_and_an_app_that_waits_lose_nothing() {
    let g = GeneratorConfig {
        flows: 4,
        verify: VerifyLevel::Full,
        // A frame every 5 ms: ten times the spin before the engine parks.
        rate_pps: Some(200.0),
        count: Some(FRAMES),
        paused: true,
        ..Default::default()
    };
    let (cfg, _dir) = generator_device("park", g);
    let run = RunOptions {
        park_after: Some(Duration::from_micros(500)),
        idle_sleep_after: None,
        ..Default::default()
    };
    let nic = Nic::start(cfg, run).unwrap();
    let mut dev = Device::attach_nic(&nic, opts()).unwrap();
    dev.alloc_rxtx_pipe(true).unwrap();
    // Once the fallback to the pipe is in place.
    nic.with_engine(|e| e.set_generators_paused(false));
    let t0 = Instant::now();
    let mut echoed = 0u64;
    let mut woke_empty = 0u64;
    while echoed < FRAMES && t0.elapsed() < Duration::from_secs(30) {
        if echoed + DELAYED >= FRAMES {
            // The engine has nothing due (the generator is done once these
            // are sent): it parks, and this send must wake it.
            std::thread::sleep(Duration::from_millis(20));
        }
        let n = echo_ready(&mut dev) as u64;
        echoed += n;
        if n == 0 && !dev.wait(Duration::from_millis(200)).unwrap() {
            woke_empty += 1;
        }
    }
    // The last echoes must come back: give the engine a moment.
    let t1 = Instant::now();
    let returned = loop {
        let s = nic.stats();
        let g = s.generator(0).unwrap().clone();
        if g.returned >= FRAMES || t1.elapsed() > Duration::from_secs(10) {
            break (s, g);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let (s, g) = returned;
    assert_eq!(echoed, FRAMES, "frames echoed: {s:?}");
    assert_eq!(g.returned, FRAMES, "{g:?}");
    assert_eq!(g.corrupt, 0, "{g:?}");
    assert_eq!(g.duplicate, 0, "{g:?}");
    let e = &s.engine;
    // 60 frames 5 ms apart: the engine parks between most of them, and the
    // application waited for most of them.
    assert!(
        (FRAMES / 2..=100 * FRAMES).contains(&e.parks),
        "parks: {e:?}"
    );
    assert!(e.app_wakeups >= FRAMES / 2, "app wakeups: {e:?}");
    let d = dev.stats();
    // A frame's notification, its send's completion, and now and then a
    // wake-up for nothing new: a few waits a frame, not a spin.
    assert!(
        (FRAMES / 2..=5 * FRAMES).contains(&d.waits),
        "{d:?} ({woke_empty} ended empty)"
    );
    // At least one of the delayed sends found the engine parked and woke
    // it (each did unless it came within the 0.5 ms spin after a timeout);
    // a server slowed by other work may wake it for other frames too, but
    // not on every register write (two or three a frame): a library that
    // woke the engine whether it slept or not would.
    assert!(
        (1..=d.mmio_writes / 2).contains(&d.engine_wakeups),
        "engine wake-ups from register writes: {d:?}, engine {e:?}"
    );
    drop(dev);
    nic.stop();
}

#[test]
fn a_wait_with_nothing_coming_lasts_its_timeout_and_says_so() {
    let g = GeneratorConfig {
        paused: true,
        ..Default::default()
    };
    let (cfg, _dir) = generator_device("parkidle", g);
    let nic = Nic::start(cfg, RunOptions::default()).unwrap();
    let mut dev = Device::attach_nic(&nic, opts()).unwrap();
    dev.alloc_rxtx_pipe(true).unwrap();
    let t = Instant::now();
    assert_eq!(dev.wait(Duration::from_millis(50)), Ok(false));
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(40) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert_eq!(dev.stats().waits, 1);
    // An engine with nothing to do sleeps; the stop command wakes it.
    std::thread::sleep(Duration::from_millis(30));
    let t = Instant::now();
    drop(dev);
    let s = nic.stop();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(s.engine.parks >= 1, "{:?}", s.engine);
}
