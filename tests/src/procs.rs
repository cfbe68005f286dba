//! Child processes for the multi-process tests: each one killed when its
//! handle is dropped (a failing test leaves nothing running), its output
//! read line by line with a deadline, and what `/proc` says about it.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A child process with piped standard streams; killed (SIGKILL) and
/// reaped when dropped unless it was waited for.
pub struct Proc {
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    /// The thread reading stderr: joined once the process has exited, so
    /// that [`Proc::stderr`] then holds all of it.
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    /// The last `count N` line read.
    count: std::cell::Cell<Option<u64>>,
    reaped: bool,
}

impl Proc {
    /// Starts `cmd` with its standard streams piped.
    pub fn spawn(name: &str, mut cmd: Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: cannot start: {e}"));
        let (tx, lines) = std::sync::mpsc::channel();
        let out = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let (err, sink) = (child.stderr.take().expect("piped stderr"), stderr.clone());
        let stderr_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = BufReader::new(err).read_to_string(&mut s);
            sink.lock().unwrap_or_else(|e| e.into_inner()).push_str(&s);
        });
        Self {
            name: name.to_string(),
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            stderr_reader: Some(stderr_reader),
            count: std::cell::Cell::new(None),
            reaped: false,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it wrote on stderr so far (all of it once it has exited and
    /// its stderr reader has finished).
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The next line of its stdout, or `None` after `limit` or once its
    /// stdout is closed.
    pub fn next_line(&self, limit: Duration) -> Option<String> {
        self.lines.recv_timeout(limit).ok()
    }

    /// The rest of the first stdout line that starts with `prefix` (the
    /// lines before it skipped); panics after `limit`.
    pub fn expect_line(&self, prefix: &str, limit: Duration) -> String {
        let until = Instant::now() + limit;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.next_line(left) {
                Some(l) => {
                    if let Some(rest) = l.strip_prefix(prefix) {
                        return rest.to_string();
                    }
                }
                None => panic!(
                    "{}: no line starting with {prefix:?} within {limit:?}; stderr: {}",
                    self.name,
                    self.stderr()
                ),
            }
        }
    }

    /// The number on the last `count N` line it wrote so far (`None` if
    /// none); the other lines read on the way are dropped.
    pub fn last_count(&self) -> Option<u64> {
        while let Ok(l) = self.lines.try_recv() {
            if let Some(n) = l.strip_prefix("count ") {
                self.count.set(n.parse().ok());
            }
        }
        self.count.get()
    }

    /// Writes one line to its stdin.
    pub fn send(&mut self, line: &str) {
        let w = self.stdin.as_mut().expect("stdin still open");
        writeln!(w, "{line}")
            .and_then(|()| w.flush())
            .unwrap_or_else(|e| panic!("{}: writing {line:?}: {e}", self.name));
    }

    /// Closes its stdin (the test binaries' signal to finish).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Sends signal `sig`.
    pub fn signal(&self, sig: i32) {
        let pid = i32::try_from(self.pid()).expect("pid fits");
        // SAFETY: kill has no memory-safety preconditions; `pid` is our own
        // child, not yet reaped (so not reused).
        let r = unsafe { libc::kill(pid, sig) };
        assert_eq!(r, 0, "{}: kill({sig}) failed", self.name);
    }

    /// Whether it has exited (reaping it, and reading the rest of its
    /// stderr, if so).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        let s = self.child.try_wait().expect("try_wait")?;
        self.reaped = true;
        // Its stderr ends with it (none of these processes leaves a child
        // holding it).
        if let Some(t) = self.stderr_reader.take() {
            let _ = t.join();
        }
        Some(s)
    }

    /// Waits for it to exit, at most `limit` (then panics, and the drop
    /// kills it).
    pub fn wait(&mut self, limit: Duration) -> std::process::ExitStatus {
        let until = Instant::now() + limit;
        loop {
            if let Some(s) = self.exited() {
                return s;
            }
            assert!(
                Instant::now() < until,
                "{}: still running after {limit:?}; stderr: {}",
                self.name,
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Kills it with SIGKILL and reaps it.
    pub fn kill(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.reaped = true;
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if !self.reaped {
            // A stopped process is continued so that it can die at once.
            let _ = self.child.kill();
            if let Ok(pid) = i32::try_from(self.child.id()) {
                // SAFETY: as in `signal`: our own unreaped child.
                unsafe { libc::kill(pid, libc::SIGCONT) };
            }
            let _ = self.child.wait();
        }
    }
}

/// The targets of process `pid`'s open file descriptors, sorted (`socket:
/// [...]`, `/memfd:enso-dev-app-3.dma (deleted)`, ...).
pub fn open_files(pid: u32) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc/PID/fd")
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A field of `/proc/<pid>/status` as a number (`VmRSS` in kB, `Threads`).
pub fn status_field(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// The state letter of process `pid` (`R`, `S`, `T` for stopped, ...).
pub fn state(pid: u32) -> char {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    s[s.rfind(')').expect("stat has a command") + 1..]
        .trim_start()
        .chars()
        .next()
        .expect("stat has a state")
}

/// The names in directory `dir`, sorted.
pub fn listing(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
