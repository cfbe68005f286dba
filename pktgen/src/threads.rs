//! How many threads a run sends and receives on, chosen from the cores the
//! process may use.
//!
//! The emulated NIC's engine is a busy thread on the same machine (and,
//! with `--in-process`, so is the echo server). Separate transmit and
//! receive threads only help when each, and every such other thread, has
//! a core: otherwise they take turns on a core with the engine and the
//! engine, not the wire, sets the rate at which frames are lost. So two
//! threads are the default only when the cores allow them; `--single-core`
//! and `--multicore` still choose.

use serde::{Deserialize, Serialize};

/// Where the choice came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadSource {
    /// From the cores the process may use.
    #[default]
    Cores,
    /// `--single-core` on the command line.
    SingleCore,
    /// `--multicore` on the command line.
    Multicore,
}

/// How many threads send and receive, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadChoice {
    /// 1: one thread sends and receives; 2: a transmit and a receive
    /// thread.
    pub threads: u32,
    /// Whether the command line chose, or the cores did.
    pub source: ThreadSource,
    /// Cores the process may use (its affinity mask).
    pub usable_cores: usize,
    /// Other busy threads the choice made room for: the NIC's engine, and
    /// with `--in-process` the echo server.
    pub other_busy: usize,
    /// The choice and its reason, in words.
    pub why: String,
}

impl Default for ThreadChoice {
    fn default() -> Self {
        Self {
            threads: 2,
            source: ThreadSource::Cores,
            usable_cores: 0,
            other_busy: 0,
            why: String::new(),
        }
    }
}

impl ThreadChoice {
    /// One thread sends and receives.
    pub fn single(&self) -> bool {
        self.threads == 1
    }
}

/// Busy threads besides the generator's that share the machine's cores:
/// the NIC's engine (a standalone NIC attached through shared memory runs
/// on this machine), and with `in_process` also the echo server.
pub fn other_busy_threads(in_process: bool) -> usize {
    if in_process {
        2
    } else {
        1
    }
}

/// Chooses the threads of a run. `asked` is what the command line said
/// (`Some(true)`: `--single-core`, `Some(false)`: `--multicore`), `usable`
/// the cores the process may use, `others` the other busy threads
/// ([`other_busy_threads`]). Without a flag, two threads when each of
/// them and each other busy thread has a core of its own (three cores
/// against a standalone NIC), else one.
pub fn choose_threads(asked: Option<bool>, usable: usize, others: usize) -> ThreadChoice {
    let need = 2 + others;
    let others_words = match others {
        0 => String::new(),
        1 => " and the NIC's engine".to_string(),
        2 => ", the NIC's engine and the echo server".to_string(),
        n => format!(" and {n} other busy threads"),
    };
    let (threads, source, why) = match asked {
        Some(true) => (1, ThreadSource::SingleCore, "--single-core".to_string()),
        Some(false) => (2, ThreadSource::Multicore, "--multicore".to_string()),
        None if usable >= need => (
            2,
            ThreadSource::Cores,
            format!(
                "{usable} cores usable: one each for the transmit and receive threads{others_words}"
            ),
        ),
        None => (
            1,
            ThreadSource::Cores,
            format!(
                "{usable} core{} usable, fewer than the {need} that separate transmit and \
                 receive threads{others_words} would busy (--multicore for two threads anyway)",
                if usable == 1 { "" } else { "s" }
            ),
        ),
    };
    let what = if threads == 1 {
        "one thread sends and receives"
    } else {
        "separate transmit and receive threads"
    };
    ThreadChoice {
        threads,
        source,
        usable_cores: usable,
        other_busy: others,
        why: format!("{what}: {why}"),
    }
}

/// Cores this process may use: its affinity mask, or, where that cannot be
/// read, what the standard library says is available.
pub fn usable_core_count() -> usize {
    let n = crate::cli::usable_cores().len();
    if n > 0 {
        n
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_cores_against_a_standalone_nic_give_two_threads() {
        let others = other_busy_threads(false);
        for usable in [0, 1, 2] {
            let c = choose_threads(None, usable, others);
            assert_eq!(c.threads, 1, "{usable}: {}", c.why);
            assert!(c.single());
            assert_eq!(c.source, ThreadSource::Cores);
            assert_eq!(c.usable_cores, usable);
        }
        for usable in [3, 4, 64] {
            let c = choose_threads(None, usable, others);
            assert_eq!(c.threads, 2, "{usable}: {}", c.why);
            assert!(!c.single());
        }
        assert_eq!(
            choose_threads(None, 2, 1).why,
            "one thread sends and receives: 2 cores usable, fewer than the 3 that separate \
             transmit and receive threads and the NIC's engine would busy (--multicore for two \
             threads anyway)"
        );
        assert_eq!(
            choose_threads(None, 3, 1).why,
            "separate transmit and receive threads: 3 cores usable: one each for the transmit \
             and receive threads and the NIC's engine"
        );
    }

    #[test]
    fn in_process_the_echo_server_needs_a_core_too() {
        let others = other_busy_threads(true);
        assert_eq!(choose_threads(None, 3, others).threads, 1);
        assert_eq!(choose_threads(None, 4, others).threads, 2);
    }

    #[test]
    fn the_command_line_wins() {
        for usable in [1, 2, 3, 16] {
            for others in [1, 2] {
                let one = choose_threads(Some(true), usable, others);
                assert_eq!((one.threads, one.source), (1, ThreadSource::SingleCore));
                assert!(one.why.ends_with("--single-core"), "{}", one.why);
                let two = choose_threads(Some(false), usable, others);
                assert_eq!((two.threads, two.source), (2, ThreadSource::Multicore));
                assert!(two.why.ends_with("--multicore"), "{}", two.why);
            }
        }
    }

    #[test]
    fn this_machine_has_at_least_one_usable_core() {
        let n = usable_core_count();
        assert!((1..=crate::cli::CPU_SET_SIZE).contains(&n), "{n}");
    }
}
