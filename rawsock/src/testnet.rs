//! Throw-away network namespaces and veth pairs for tests (feature
//! `test-support`).
//!
//! Everything here runs `ip` (iproute2) and `ethtool` and needs root. Names
//! are unique per process and call (`rs<pid>n<counter>` for namespaces,
//! interface names at most 15 bytes), and each object deletes exactly what
//! it created when dropped — nothing else is ever touched. A namespace is
//! removed by name on drop; the kernel destroys it (and the interfaces in
//! it) once no process, thread or socket still uses it, so drop sockets made
//! inside it first (declare the [`Netns`] before them).
//!
//! [`preflight`] decides whether a test can run here: without root or with a
//! tool missing it returns why, for the test to record (the workspace's
//! tests pass it to `test_skips::skipped`) before it returns early and
//! passes, except that a missing tool fails the test when the environment
//! variable `CI` is `true`.
//!
//! ```no_run
//! use rawsock::testnet::{preflight, Netns, Veth};
//! if let Some(why) = preflight(&["ip", "ethtool"]) {
//!     eprintln!("skipped: {why}"); // or record it: test_skips::skipped(why)
//!     return;
//! }
//! let a = Netns::new().unwrap();
//! let b = Netns::new().unwrap();
//! let veth = Veth::new(&a, &b).unwrap(); // both ends up, offloads off
//! let cfg = rawsock::AfPacketConfig::new(veth.a());
//! // Opened inside `a`, then used from this thread.
//! let mut port = a.enter(|| rawsock::AfPacket::open(&cfg)).unwrap().unwrap();
//! port.tx_burst([&[0u8; 60][..]]);
//! ```

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A name `prefix<pid in hex><tag><counter in hex><suffix>`, unique in this
/// process, checked to fit an interface name (15 bytes).
pub fn unique_name(prefix: &str, tag: char, suffix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = format!("{prefix}{:x}{tag}{n:x}{suffix}", std::process::id());
    assert!(
        name.len() <= 15,
        "test interface name {name:?} is longer than 15 bytes"
    );
    name
}

/// Why a test needing root and `tools` cannot run here; `None` when it can.
///
/// Returns the reason (for the test to record, then return and pass)
/// without root or with a tool missing; panics instead when a tool is
/// missing and `CI=true`.
/// A tool is a program name looked up in `PATH` (then `/usr/sbin`, `/sbin`),
/// or an absolute path (such as `/dev/net/tun`) that must exist.
#[must_use = "the test should record the reason and return"]
pub fn preflight(tools: &[&str]) -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| find_tool(t).is_none())
        .collect();
    let ci = std::env::var("CI").as_deref() == Ok("true");
    match decide(root, &missing, ci) {
        Ok(()) => None,
        Err(Skip::Pass(why)) => Some(why),
        Err(Skip::Fail(why)) => panic!("{why}"),
    }
}

/// Why a test does not run.
#[derive(Debug, PartialEq, Eq)]
enum Skip {
    /// Return early and pass.
    Pass(String),
    /// Fail the test.
    Fail(String),
}

fn decide(root: bool, missing: &[&str], ci: bool) -> Result<(), Skip> {
    if !root {
        return Err(Skip::Pass("needs root".to_owned()));
    }
    if missing.is_empty() {
        return Ok(());
    }
    let why = format!("missing {}", missing.join(", "));
    if ci {
        Err(Skip::Fail(format!(
            "{why} (CI=true: a missing tool is a failure; install iproute2 and ethtool)"
        )))
    } else {
        Err(Skip::Pass(why))
    }
}

/// Where `tool` is: itself if it is an absolute path that exists, else the
/// first match in `PATH`, `/usr/sbin` or `/sbin`.
fn find_tool(tool: &str) -> Option<PathBuf> {
    if tool.starts_with('/') {
        return Path::new(tool).exists().then(|| PathBuf::from(tool));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|dir| dir.join(tool))
        .find(|p| p.is_file())
}

/// Runs `program args` (found as [`preflight`] finds it), failing unless it
/// exits 0; its stderr is in the error.
pub fn run(program: &str, args: &[&str]) -> io::Result<Output> {
    let path = find_tool(program)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{program} not found")))?;
    let out = Command::new(path)
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out)
}

/// A network namespace made for a test, deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Makes a new, uniquely named namespace with its loopback up.
    pub fn new() -> io::Result<Netns> {
        // A name left over from an earlier process with the same id is
        // someone else's: skip it rather than reuse or delete it.
        let mut last = None;
        for _ in 0..8 {
            let name = unique_name("rs", 'n', "");
            match run("ip", &["netns", "add", &name]) {
                Ok(_) => {
                    let ns = Netns { name };
                    ns.ip(&["link", "set", "lo", "up"])?;
                    return Ok(ns);
                }
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("ip netns add failed")))
    }

    /// The namespace's name (as `ip netns` knows it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip -n NAME args`.
    pub fn ip(&self, args: &[&str]) -> io::Result<Output> {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// Runs `program args` inside the namespace (`ip netns exec`).
    pub fn exec(&self, program: &str, args: &[&str]) -> io::Result<Output> {
        let path = find_tool(program).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("{program} not found"))
        })?;
        let path = path.to_string_lossy();
        let mut all = vec!["netns", "exec", &self.name, &path];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// Runs `f` on a new thread that has joined this namespace, and returns
    /// its result. Sockets and TAP devices made by `f` belong to the
    /// namespace and stay there when the value is used from other threads.
    pub fn enter<R: Send, F: FnOnce() -> R + Send>(&self, f: F) -> io::Result<R> {
        let path = format!("/run/netns/{}", self.name);
        let file = File::open(&path)?;
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    // SAFETY: `file` is an open namespace file; setns only
                    // changes this thread's network namespace, and the
                    // thread ends after `f`.
                    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                    if rc != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    Ok(f())
                })
                .join()
                .map_err(|_| io::Error::other("the thread in the namespace panicked"))?
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Err(err) = run("ip", &["netns", "delete", &self.name]) {
            eprintln!("could not delete network namespace {}: {err}", self.name);
        }
    }
}

/// A veth pair with one end in each of two test namespaces, both ends up
/// and with `tx`, `tso` and `gso` offloads off (so frames from the local
/// stack carry finished checksums and no GSO super-frames). Deleted on drop.
#[derive(Debug)]
pub struct Veth {
    ns_a: String,
    a: String,
    b: String,
}

impl Veth {
    /// Makes the pair: end [`Veth::a`] in `ns_a`, end [`Veth::b`] in `ns_b`.
    pub fn new(ns_a: &Netns, ns_b: &Netns) -> io::Result<Veth> {
        let stem = unique_name("rs", 'v', "");
        let a = format!("{stem}a");
        let b = format!("{stem}b");
        assert!(b.len() <= 15, "veth name {b:?} is longer than 15 bytes");
        ns_a.ip(&[
            "link", "add", &a, "type", "veth", "peer", "name", &b, "netns", &ns_b.name,
        ])?;
        let veth = Veth {
            ns_a: ns_a.name.clone(),
            a,
            b,
        };
        for (ns, dev) in [(ns_a, &veth.a), (ns_b, &veth.b)] {
            ns.exec(
                "ethtool",
                &["-K", dev, "tx", "off", "tso", "off", "gso", "off"],
            )?;
            // No IPv6 autoconfiguration chatter on the test link.
            // Best effort: IPv6 may be absent.
            let knob = format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6");
            let _ = ns.enter(|| std::fs::write(&knob, "1"));
            ns.ip(&["link", "set", dev, "up"])?;
        }
        Ok(veth)
    }

    /// The end in the first namespace.
    pub fn a(&self) -> &str {
        &self.a
    }

    /// The end in the second namespace.
    pub fn b(&self) -> &str {
        &self.b
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        // Deleting one end removes both. If the namespace is already gone,
        // so is the pair, and `ip -n` fails harmlessly.
        let _ = run("ip", &["-n", &self.ns_a, "link", "delete", &self.a]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preflight_decisions() {
        let why = |s: &str| s.to_owned();
        assert_eq!(
            decide(false, &[], false),
            Err(Skip::Pass(why("needs root")))
        );
        assert_eq!(
            decide(false, &["ethtool"], true),
            Err(Skip::Pass(why("needs root")))
        );
        assert_eq!(decide(true, &[], true), Ok(()));
        assert_eq!(
            decide(true, &["ethtool"], false),
            Err(Skip::Pass(why("missing ethtool")))
        );
        assert!(
            matches!(decide(true, &["ip", "ethtool"], true), Err(Skip::Fail(w)) if w.starts_with("missing ip, ethtool"))
        );
    }

    #[test]
    fn names_are_unique_and_short() {
        let a = unique_name("tap-", '-', "");
        let b = unique_name("tap-", '-', "");
        assert_ne!(a, b);
        assert!(a.len() <= 15 && b.len() <= 15);
        assert!(find_tool("/").is_some());
        assert!(find_tool("rawsock-no-such-tool").is_none());
    }
}
