//! Which cores threads can be pinned to, shared by the workspace's binaries
//! (the engine, applications, packet generator and benchmarks all pin).

/// Cores a thread can be pinned to at all: libc's `cpu_set_t` has this
/// many bits, and `CPU_SET` panics for a larger core number.
pub const CPU_SET_SIZE: usize = 1024;

/// The cores this process may run on (its affinity mask), sorted; empty if
/// they cannot be listed. Read it before pinning the calling thread: a
/// pinned thread sees its one core.
pub fn usable_cores() -> Vec<usize> {
    let mut v: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// `cores` (sorted) as ranges: `0-3,8,10-11`.
pub fn core_list(cores: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cores.len() {
        let mut j = i;
        while j + 1 < cores.len() && cores[j + 1] == cores[j] + 1 {
            j += 1;
        }
        parts.push(if j == i {
            cores[i].to_string()
        } else {
            format!("{}-{}", cores[i], cores[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// Whether a thread can be pinned to `core`: one of `usable` (from
/// [`usable_cores`]), or, if that list is empty, below [`CPU_SET_SIZE`].
pub fn can_pin(core: usize, usable: &[usize]) -> bool {
    core < CPU_SET_SIZE && (usable.is_empty() || usable.contains(&core))
}

/// The cores [`can_pin`] accepts, as ranges (for messages).
pub fn pinnable_list(usable: &[usize]) -> String {
    if usable.is_empty() {
        format!("0-{}", CPU_SET_SIZE - 1)
    } else {
        core_list(usable)
    }
}

/// Pins the calling thread to `core`; false if that failed. A core number
/// of [`CPU_SET_SIZE`] or more fails here instead of panicking in libc's
/// `CPU_SET`.
pub fn pin_current(core: usize) -> bool {
    core < CPU_SET_SIZE && core_affinity::set_for_current(core_affinity::CoreId { id: core })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_cores_as_ranges() {
        assert_eq!(core_list(&[]), "");
        assert_eq!(core_list(&[3]), "3");
        assert_eq!(core_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
    }

    #[test]
    fn refuses_cores_beyond_the_cpu_set() {
        assert!(!pin_current(CPU_SET_SIZE));
        assert!(!pin_current(usize::MAX));
    }
}
