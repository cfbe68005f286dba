//! Which cores the two sides of an experiment run on.
//!
//! Every throughput experiment has two busy sides (NIC engine and
//! application, or producer and consumer of the reference ring), called side
//! [`Side::A`] and side [`Side::B`]. A [`Placement`] names one core for each
//! and pins threads to them. When the machine cannot give two distinct cores
//! (one core only, or pinning refused) the placement still works — both sides
//! then share a core or float — and it says so in [`Placement::notes`], which
//! every result prints, because such rates are not comparable.

use std::fmt;
use std::thread::{self, JoinHandle};

use serde::Serialize;

/// One of the two busy sides of an experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Side {
    /// The first side: the NIC engine, or the producer of the reference ring.
    A,
    /// The second side: the application, or the consumer of the reference ring.
    B,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::A => "A",
            Side::B => "B",
        })
    }
}

/// The cores chosen for the two sides.
#[derive(Clone, Debug, Serialize)]
pub struct Placement {
    /// Core for side A, or `None` if threads cannot be pinned at all.
    pub core_a: Option<usize>,
    /// Core for side B, or `None` if threads cannot be pinned at all.
    pub core_b: Option<usize>,
    /// Cores this process may run on (its affinity mask), ascending.
    pub available: Vec<usize>,
    /// Why the placement is not two distinct pinned cores, if it is not.
    pub notes: Vec<String>,
}

/// Why a requested placement cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlacementError {
    /// The `--cores` text is not two comma-separated core numbers.
    Syntax(String),
    /// A requested core is not in this process's affinity mask.
    Unavailable {
        /// The requested core.
        core: usize,
        /// The cores that are available.
        available: Vec<usize>,
    },
    /// Both sides were asked to run on the same core.
    SameCore(usize),
}

impl fmt::Display for PlacementError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlacementError::Syntax(s) => {
                write!(
                    f,
                    "cannot parse cores {s:?}: expected two core numbers like 0,1"
                )
            }
            PlacementError::Unavailable { core, available } if available.is_empty() => {
                write!(
                    f,
                    "core {core} cannot be pinned to (cores are numbered below {})",
                    crate::cores::CPU_SET_SIZE
                )
            }
            PlacementError::Unavailable { core, available } => {
                write!(
                    f,
                    "core {core} is not available to this process (available: {available:?})"
                )
            }
            PlacementError::SameCore(c) => {
                write!(f, "both sides on core {c}: give two distinct cores")
            }
        }
    }
}

impl std::error::Error for PlacementError {}

fn available_cores() -> Vec<usize> {
    crate::cores::usable_cores()
}

impl Placement {
    /// The first two cores of the affinity mask, with a note if there are
    /// fewer than two (both sides then share the one core) or none can be
    /// listed (threads are not pinned).
    pub fn pick() -> Placement {
        Self::from_available(available_cores())
    }

    fn from_available(available: Vec<usize>) -> Placement {
        let mut notes = Vec::new();
        let (core_a, core_b) = match available.as_slice() {
            [] => {
                notes.push(
                    "cannot list the cores of this process: threads are not pinned, \
                     rates depend on the scheduler"
                        .to_string(),
                );
                (None, None)
            }
            [only] => {
                notes.push(format!(
                    "only one core ({only}) is available: both sides share it, \
                     rates are not comparable to a 2-core run"
                ));
                (Some(*only), Some(*only))
            }
            [a, b, ..] => (Some(*a), Some(*b)),
        };
        Placement {
            core_a,
            core_b,
            available,
            notes,
        }
    }

    /// Two given cores, checked against the affinity mask.
    pub fn with_cores(a: usize, b: usize) -> Result<Placement, PlacementError> {
        Self::with_cores_in(a, b, available_cores())
    }

    /// [`Placement::with_cores`] against the cores `available` (empty: the
    /// mask could not be read, and any core libc's CPU set holds passes).
    fn with_cores_in(
        a: usize,
        b: usize,
        available: Vec<usize>,
    ) -> Result<Placement, PlacementError> {
        if a == b {
            return Err(PlacementError::SameCore(a));
        }
        for core in [a, b] {
            // Pinning to a core beyond the CPU set panics in libc.
            let listed = available.is_empty() || available.contains(&core);
            if core >= crate::cores::CPU_SET_SIZE || !listed {
                return Err(PlacementError::Unavailable { core, available });
            }
        }
        let mut notes = Vec::new();
        if available.is_empty() {
            notes.push("cannot list the cores of this process: pinning may fail".to_string());
        }
        Ok(Placement {
            core_a: Some(a),
            core_b: Some(b),
            available,
            notes,
        })
    }

    /// Parses `"A,B"` (as given to `--cores`) and checks it like
    /// [`Placement::with_cores`].
    pub fn parse(text: &str) -> Result<Placement, PlacementError> {
        let syntax = || PlacementError::Syntax(text.to_string());
        let (a, b) = text.split_once(',').ok_or_else(syntax)?;
        let a = a.trim().parse().map_err(|_| syntax())?;
        let b = b.trim().parse().map_err(|_| syntax())?;
        Self::with_cores(a, b)
    }

    /// The core chosen for `side`, if any.
    pub fn core(&self, side: Side) -> Option<usize> {
        match side {
            Side::A => self.core_a,
            Side::B => self.core_b,
        }
    }

    /// `[core A, core B]`, as printed in results.
    pub fn cores(&self) -> [Option<usize>; 2] {
        [self.core_a, self.core_b]
    }

    /// Whether the two sides run on two distinct pinned cores: the only case
    /// whose rates are comparable to the reference.
    pub fn is_two_cores(&self) -> bool {
        matches!((self.core_a, self.core_b), (Some(a), Some(b)) if a != b)
    }

    /// Pins the calling thread to `side`'s core. Returns whether it is pinned;
    /// on failure it prints a note to stderr and the thread floats.
    pub fn pin_current(&self, side: Side) -> bool {
        let Some(id) = self.core(side) else {
            return false;
        };
        let ok = crate::cores::pin_current(id);
        if !ok {
            eprintln!("note: cannot pin side {side} to core {id}: it floats");
        }
        ok
    }

    /// Spawns a named thread pinned to `side`'s core; the closure is told
    /// whether pinning worked.
    pub fn spawn<F, T>(&self, side: Side, name: &str, f: F) -> std::io::Result<JoinHandle<T>>
    where
        F: FnOnce(bool) -> T + Send + 'static,
        T: Send + 'static,
    {
        let placement = self.clone();
        thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let pinned = placement.pin_current(side);
                f(pinned)
            })
    }

    /// `"0,1"`-style label; `-` for an unpinned side.
    pub fn label(&self) -> String {
        let c = |c: Option<usize>| c.map_or_else(|| "-".to_string(), |c| c.to_string());
        format!("{},{}", c(self.core_a), c(self.core_b))
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cores {}", self.label())?;
        for note in &self.notes {
            write!(f, " (note: {note})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallbacks_are_noted() {
        let none = Placement::from_available(vec![]);
        assert_eq!(none.cores(), [None, None]);
        assert!(!none.is_two_cores());
        assert_eq!(none.notes.len(), 1);

        let one = Placement::from_available(vec![3]);
        assert_eq!(one.cores(), [Some(3), Some(3)]);
        assert!(!one.is_two_cores());
        assert!(one.notes[0].contains("only one core"));

        let two = Placement::from_available(vec![0, 1, 2]);
        assert_eq!(two.cores(), [Some(0), Some(1)]);
        assert!(two.is_two_cores());
        assert!(two.notes.is_empty());
        assert_eq!(two.label(), "0,1");
    }

    #[test]
    fn parse_rejects_bad_input() {
        assert!(matches!(
            Placement::parse("0"),
            Err(PlacementError::Syntax(_))
        ));
        assert!(matches!(
            Placement::parse("a,b"),
            Err(PlacementError::Syntax(_))
        ));
        assert!(matches!(
            Placement::parse("1,1"),
            Err(PlacementError::SameCore(1))
        ));
        assert!(matches!(
            Placement::parse("0,100000"),
            Err(PlacementError::Unavailable { core: 100000, .. })
        ));
        // With a mask that cannot be read, only cores libc's CPU set holds.
        assert!(Placement::with_cores_in(0, 1023, vec![]).is_ok());
        let e = Placement::with_cores_in(0, 1024, vec![]).unwrap_err();
        assert!(matches!(e, PlacementError::Unavailable { core: 1024, .. }));
        assert_eq!(
            e.to_string(),
            "core 1024 cannot be pinned to (cores are numbered below 1024)"
        );
        assert!(matches!(
            Placement::with_cores_in(2, 1, vec![0, 1]),
            Err(PlacementError::Unavailable { core: 2, .. })
        ));
    }

    #[test]
    fn spawn_runs_the_closure() {
        let p = Placement::pick();
        let h = p.spawn(Side::B, "t", |_pinned| 7).unwrap();
        assert_eq!(h.join().unwrap(), 7);
    }
}
