//! Hardware cache counters of one thread, through `perf_event_open(2)`.
//!
//! Counts user-space events of the calling thread only (no privileges
//! needed at `perf_event_paranoid` <= 2): instructions, L1d loads and load
//! misses, last-level-cache loads and load misses. Machines without a PMU
//! (most VMs) refuse every event; [`Counters::open`] then fails and callers
//! fall back to a cache simulator.
//!
//! This is the one place besides the reference ring that needs `unsafe`:
//! the system call, `ioctl`, `read` and `close` on the counters' file
//! descriptors.

use std::io;

use serde::{Deserialize, Serialize};

/// The first (64-byte) version of `struct perf_event_attr`; the kernel
/// accepts it and zero-fills the newer fields.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// Bit 0 disabled, 5 exclude_kernel, 6 exclude_hv.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_ATTR_SIZE_VER0: u32 = 64;
const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_HW_CACHE: u32 = 3;
const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
const CACHE_L1D: u64 = 0;
const CACHE_LL: u64 = 2;
const OP_READ: u64 = 0;
const RESULT_ACCESS: u64 = 0;
const RESULT_MISS: u64 = 1;
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;
const IOC_RESET: libc::c_ulong = 0x2403;

/// The events counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// Retired instructions.
    Instructions,
    /// L1 data cache loads.
    L1dLoads,
    /// L1 data cache load misses.
    L1dLoadMisses,
    /// Last-level cache loads.
    LlcLoads,
    /// Last-level cache load misses.
    LlcLoadMisses,
}

impl Event {
    /// Every event, in report order.
    pub const ALL: [Event; 5] = [
        Event::Instructions,
        Event::L1dLoads,
        Event::L1dLoadMisses,
        Event::LlcLoads,
        Event::LlcLoadMisses,
    ];

    fn type_config(self) -> (u32, u64) {
        let cache = |id: u64, result: u64| (PERF_TYPE_HW_CACHE, id | OP_READ << 8 | result << 16);
        match self {
            Event::Instructions => (PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS),
            Event::L1dLoads => cache(CACHE_L1D, RESULT_ACCESS),
            Event::L1dLoadMisses => cache(CACHE_L1D, RESULT_MISS),
            Event::LlcLoads => cache(CACHE_LL, RESULT_ACCESS),
            Event::LlcLoadMisses => cache(CACHE_LL, RESULT_MISS),
        }
    }
}

/// Counts read from [`Counters`]; `None` for events the machine refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Retired instructions.
    pub instructions: Option<u64>,
    /// L1d loads.
    pub l1d_loads: Option<u64>,
    /// L1d load misses.
    pub l1d_misses: Option<u64>,
    /// LLC loads.
    pub llc_loads: Option<u64>,
    /// LLC load misses.
    pub llc_misses: Option<u64>,
}

impl Counts {
    fn set(&mut self, e: Event, v: u64) {
        let slot = match e {
            Event::Instructions => &mut self.instructions,
            Event::L1dLoads => &mut self.l1d_loads,
            Event::L1dLoadMisses => &mut self.l1d_misses,
            Event::LlcLoads => &mut self.llc_loads,
            Event::LlcLoadMisses => &mut self.llc_misses,
        };
        *slot = Some(v);
    }
}

/// Open counters of the thread that opened them.
#[derive(Debug)]
pub struct Counters {
    fds: Vec<(Event, libc::c_int)>,
}

fn open_one(e: Event) -> io::Result<libc::c_int> {
    let (type_, config) = e.type_config();
    let attr = PerfEventAttr {
        type_,
        size: PERF_ATTR_SIZE_VER0,
        config,
        flags: FLAG_DISABLED | FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV,
        ..Default::default()
    };
    // SAFETY: `attr` is a valid, initialised perf_event_attr of the size it
    // declares and outlives the call; pid 0 / cpu -1 is the calling thread
    // on any CPU; no group, no flags. The kernel only reads `attr`.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            0 as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            0 as libc::c_ulong,
        )
    };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(fd as libc::c_int)
    }
}

impl Counters {
    /// Opens every event the machine supports for the calling thread
    /// (disabled); fails if it supports none of them.
    pub fn open() -> Result<Counters, String> {
        let mut fds = Vec::new();
        let mut first_err = None;
        for e in Event::ALL {
            match open_one(e) {
                Ok(fd) => fds.push((e, fd)),
                Err(err) => {
                    first_err.get_or_insert(err);
                }
            }
        }
        if fds.is_empty() {
            let err = first_err.map_or_else(|| "no events".to_string(), |e| e.to_string());
            return Err(format!(
                "perf_event_open: {err} (no hardware counters here)"
            ));
        }
        Ok(Counters { fds })
    }

    fn ioctl_all(&self, request: libc::c_ulong) {
        for &(_, fd) in &self.fds {
            // SAFETY: `fd` is a perf event descriptor this value owns; the
            // request takes no argument.
            unsafe { libc::ioctl(fd, request, 0) };
        }
    }

    /// Zeroes and starts the counters.
    pub fn start(&self) {
        self.ioctl_all(IOC_RESET);
        self.ioctl_all(IOC_ENABLE);
    }

    /// Stops the counters (they keep their values).
    pub fn stop(&self) {
        self.ioctl_all(IOC_DISABLE);
    }

    /// Current values.
    pub fn read(&self) -> Counts {
        let mut c = Counts::default();
        for &(e, fd) in &self.fds {
            let mut v: u64 = 0;
            // SAFETY: reads 8 bytes into `v`, which is 8 writable bytes;
            // `fd` is an open perf event descriptor owned by `self`.
            let n = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
            if n == 8 {
                c.set(e, v);
            }
        }
        c
    }
}

impl Drop for Counters {
    fn drop(&mut self) {
        for &(_, fd) in &self.fds {
            // SAFETY: `fd` was opened by `open` and is closed only here.
            unsafe { libc::close(fd) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_is_the_version_0_layout() {
        assert_eq!(
            std::mem::size_of::<PerfEventAttr>(),
            PERF_ATTR_SIZE_VER0 as usize
        );
        assert_eq!(Event::L1dLoadMisses.type_config(), (3, 1 << 16));
        assert_eq!(Event::LlcLoads.type_config(), (3, 2));
    }

    #[test]
    fn opens_or_explains() {
        // Either the machine has counters (and they count) or it says why.
        let work = || {
            let mut x = 0u64;
            for i in 0..10_000u64 {
                x = std::hint::black_box(x.wrapping_add(i));
            }
            x
        };
        match Counters::open() {
            Ok(c) => {
                assert!(!c.fds.is_empty(), "open succeeds with some event");
                c.start();
                // With more events than the PMU holds, the kernel counts
                // each only part of the time: work until the instruction
                // count moves, within a deadline far beyond a rotation.
                let opened = |e| c.fds.iter().any(|&(o, _)| o == e);
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                while opened(Event::Instructions) && c.read().instructions == Some(0) {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "no instructions counted"
                    );
                    work();
                }
                c.stop();
                let n = c.read();
                // Every event that opened reads a value, and only those.
                for (e, value) in [
                    (Event::Instructions, n.instructions),
                    (Event::L1dLoads, n.l1d_loads),
                    (Event::L1dLoadMisses, n.l1d_misses),
                    (Event::LlcLoads, n.llc_loads),
                    (Event::LlcLoadMisses, n.llc_misses),
                ] {
                    assert_eq!(value.is_some(), opened(e), "{e:?}: {n:?}");
                }
                if opened(Event::Instructions) {
                    assert!(n.instructions > Some(0), "{n:?}");
                }
                // Stopped counters keep their values through more work.
                work();
                assert_eq!(c.read(), n);
            }
            Err(e) => assert!(e.contains("perf_event_open"), "{e}"),
        }
    }
}
