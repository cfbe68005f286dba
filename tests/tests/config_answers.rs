//! Configuration calls return the NIC's answer, flow rules are charged to
//! the application that bound them, and one application's port settings
//! (timestamping, rate limits) never touch another application's frames.

use std::time::{Duration, Instant};

use enso::{ConfigError, Device, DeviceOptions, FlowRule, MAX_FLOW_RULES};
use enso_tests::{echo_ready, generator_device};
use nic_emu::wire::PROTO_UDP;
use nic_emu::{GeneratorConfig, Nic, RunOptions, VerifyLevel, WireConfig};

/// One test at a time: each runs a NIC whose engine spins on a core, and
/// the rate test below compares windows of one run (two vCPUs).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn udp(dst_ip: u32, dst_port: u16) -> FlowRule {
    FlowRule {
        src_ip: 0,
        dst_ip,
        src_port: 0,
        dst_port,
        protocol: PROTO_UDP,
    }
}

fn idle_nic(name: &str) -> (Nic, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = nic_emu::DeviceConfig::new(name, WireConfig::Null);
    cfg.dir = dir.path().to_path_buf();
    cfg.pipe_size = 64 << 10;
    cfg.notif_ring_entries = 1024;
    (Nic::start(cfg, RunOptions::default()).unwrap(), dir)
}

fn opts() -> DeviceOptions {
    DeviceOptions {
        pipes: 2,
        tx_pipes: 0,
        ..Default::default()
    }
}

#[test]
fn binds_past_the_quota_fail_naming_it_and_the_nic_holds_exactly_the_successes() {
    let _one = serial();
    assert_eq!(MAX_FLOW_RULES, nic_emu::engine::MAX_RULES_PER_APP);
    let (nic, _dir) = idle_nic("quota");
    let mut a = Device::attach_nic(&nic, opts()).unwrap();
    let pipe = a.alloc_rxtx_pipe(false).unwrap();
    let tries = MAX_FLOW_RULES + 500;
    let mut ok = 0;
    for i in 0..tries {
        match a.bind(pipe, udp(0x0a00_0000 + i, 4000)) {
            Ok(()) => ok += 1,
            Err(ConfigError::QuotaReached(n)) => {
                assert_eq!(n, MAX_FLOW_RULES);
                assert!(i >= MAX_FLOW_RULES, "quota hit after {i} rules");
            }
            Err(e) => panic!("bind {i}: {e}"),
        }
    }
    assert_eq!(ok, MAX_FLOW_RULES);
    assert_eq!(nic.stats().flow_rules, MAX_FLOW_RULES as usize);
    let e = a.bind(pipe, udp(1, 1)).unwrap_err();
    assert!(e.to_string().contains("quota"), "{e}");
    // Rebinding a rule it holds is not a new rule.
    assert_eq!(a.bind(pipe, udp(0x0a00_0000, 4000)), Ok(()));
    // Removing one makes room for one.
    assert_eq!(a.unbind(pipe, udp(0x0a00_0005, 4000)), Ok(()));
    assert_eq!(a.bind(pipe, udp(2, 2)), Ok(()));
    assert_eq!(
        a.bind(pipe, udp(3, 3)),
        Err(ConfigError::QuotaReached(MAX_FLOW_RULES))
    );
    assert_eq!(nic.stats().flow_rules, MAX_FLOW_RULES as usize);
    // Refusals are counted where they always were.
    let refused = nic.stats().apps[0].counters.reject_bad_config;
    assert_eq!(refused, u64::from(tries - MAX_FLOW_RULES) + 2);
    // Its rules end with it, and the table is as it was.
    drop(a);
    let t0 = Instant::now();
    while nic.stats().flow_rules != 0 {
        assert!(t0.elapsed() < Duration::from_secs(10), "rules left behind");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut b = Device::attach_nic(&nic, opts()).unwrap();
    let pipe = b.alloc_rxtx_pipe(false).unwrap();
    assert_eq!(b.bind(pipe, udp(0x0a00_0000, 4000)), Ok(()));
    assert_eq!(nic.stats().flow_rules, 1);
}

#[test]
fn unbinding_what_was_never_bound_and_anothers_rules_fail_with_the_reason() {
    let _one = serial();
    let (nic, _dir) = idle_nic("owners");
    let mut a = Device::attach_nic(&nic, opts()).unwrap();
    let mut b = Device::attach_nic(&nic, opts()).unwrap();
    let pa = a.alloc_rxtx_pipe(false).unwrap();
    let pb = b.alloc_rxtx_pipe(false).unwrap();
    assert_eq!(a.unbind(pa, udp(9, 9)), Err(ConfigError::NotBound));
    assert_eq!(a.bind(pa, udp(9, 9)), Ok(()));
    // B can neither take A's flow nor remove it.
    assert_eq!(b.bind(pb, udp(9, 9)), Err(ConfigError::NotOwner));
    assert_eq!(b.unbind(pb, udp(9, 9)), Err(ConfigError::NotOwner));
    assert_eq!(nic.stats().flow_rules, 1);
    assert_eq!(a.unbind(pa, udp(9, 9)), Ok(()));
    assert_eq!(a.unbind(pa, udp(9, 9)), Err(ConfigError::NotBound));
    assert_eq!(b.bind(pb, udp(9, 9)), Ok(()));
    assert_eq!(nic.stats().flow_rules, 1);
    // An offset the NIC cannot stamp at is refused before it goes out; a
    // port the device lacks too.
    assert_eq!(a.set_timestamping(0, Some(61)), Err(ConfigError::BadValue));
    assert_eq!(
        a.set_rate_limit(7, Some((1, 1))),
        Err(ConfigError::BadValue)
    );
    assert_eq!(a.set_timestamping(0, Some(16)), Ok(()));
    assert_eq!(a.set_rate_limit(0, None), Ok(()));
}

/// Echoes on `dev` until `n` frames came back or 10 s passed; returns
/// the frames echoed.
fn echo_n(dev: &mut Device, n: u64) -> u64 {
    let t0 = Instant::now();
    let mut done = 0;
    while done < n && t0.elapsed() < Duration::from_secs(10) {
        done += echo_ready(dev) as u64;
    }
    done
}

/// Frames each phase echoes: under a limit of one flit every 5 ms (what
/// the other application sets) that would take 25 s, and the generator's
/// window of 256 would stall long before; unlimited, well under a second.
const PHASE: u64 = 5000;

#[test]
fn another_applications_timestamping_and_rate_limit_leave_an_echo_intact() {
    let _one = serial();
    let g = GeneratorConfig {
        flows: 16,
        verify: VerifyLevel::Full,
        max_in_flight: Some(256),
        ..Default::default()
    };
    let (cfg, _dir) = generator_device("ports", g);
    let nic = Nic::start(cfg, RunOptions::default()).unwrap();
    let mut echo = Device::attach_nic(&nic, opts()).unwrap();
    echo.alloc_rxtx_pipe(true).unwrap();
    assert!(echo_n(&mut echo, PHASE) >= PHASE, "the echo runs");
    // Another application on the same port stamps and limits what it
    // sends and receives: none of it reaches the echo's frames. Before,
    // both were the port's: the echo's frames came back stamped (corrupt)
    // and paced to a frame every 5 ms, also after the other detached.
    let mut other = Device::attach_nic(&nic, opts()).unwrap();
    other.alloc_rxtx_pipe(false).unwrap();
    assert_eq!(other.set_timestamping(0, Some(16)), Ok(()));
    assert_eq!(other.set_rate_limit(0, Some((1, 1_000_000))), Ok(()));
    assert!(echo_n(&mut echo, PHASE) >= PHASE, "the echo is not limited");
    drop(other);
    assert!(echo_n(&mut echo, PHASE) >= PHASE, "nor after it detached");
    let s = nic.stats();
    let g = s.generator(0).unwrap();
    assert_eq!(g.corrupt, 0, "frames changed on the way: {g:?}");
    assert_eq!(g.duplicate, 0);
    assert!(g.returned >= 3 * PHASE, "{g:?}");
}
