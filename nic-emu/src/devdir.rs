//! The device directory: where a device's control socket and counters
//! snapshot live (`<dir>/enso-<name>`, `/dev/shm` by default), made and
//! removed so that no one else's file is ever touched.
//!
//! The NIC may run as root in a directory every user can write to
//! (`/dev/shm`), so the directory is handled as a hostile place:
//! - **Names.** A device name is one path component of letters, digits,
//!   `.`, `_` and `-`, starting with a letter, digit or `_`, at most
//!   [`MAX_NAME`] bytes ([`check_name`]). `nm/../enso-x` and `..` are
//!   refused in every program that takes a name, not only in the NIC.
//! - **Making it.** `mkdirat(parent, "enso-<name>", 0700)` never follows a
//!   link; the directory is then opened with `O_NOFOLLOW` and its owner and
//!   mode are checked on the open descriptor, so a symlink planted at the
//!   path (to make the NIC chmod or fill a directory of the planter's
//!   choosing) is refused, never followed. A parent that others may write
//!   to without the sticky bit is refused: there anyone could swap the
//!   directory for another after it was checked.
//! - **An existing one** is reclaimed only when it is provably a dead
//!   device of ours: a directory (not a link), owned by us, holding only the
//!   files a device makes, among them its [`MARKER`] naming a process that
//!   no longer runs. Anything else is refused with one line that says what
//!   is there; nothing in it is removed.
//! - **Removing it** ([`remove`]) unlinks only the files a device makes and
//!   then the directory if it is empty: a file someone else put there stays,
//!   and so does the directory holding it.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

pub use enso_abi::devname::{check_name, path, MAX_NAME};

/// Why a device directory was not made; every message is one line naming
/// the path.
#[derive(Debug, thiserror::Error)]
pub enum DevDirError {
    /// The device name cannot name a directory ([`check_name`]).
    #[error("{0}")]
    Name(String),
    /// The parent directory is missing or not a directory.
    #[error("{}: not an existing directory (the device directory is made inside it)", .0.display())]
    NoParent(PathBuf),
    /// Others may write to the parent and it is not sticky.
    #[error("{}: others may write to it and it is not sticky (mode {mode:o}): a device directory there could be swapped for another; use a directory only you can write to, or a sticky one like /dev/shm", .parent.display())]
    UnsafeParent {
        /// The parent directory.
        parent: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The device runs already.
    #[error("device '{name}' is already running ({})", .dir.display())]
    Running {
        /// The device's name.
        name: String,
        /// Its directory.
        dir: PathBuf,
    },
    /// The directory belongs to a process that still runs.
    #[error("device '{name}' belongs to process {pid} that still runs ({}); stop it first", .dir.display())]
    Owned {
        /// The device's name.
        name: String,
        /// The process named by its marker.
        pid: String,
        /// Its directory.
        dir: PathBuf,
    },
    /// Something about the directory itself (what is there, or a system
    /// call's error).
    #[error("{}: {what}", .dir.display())]
    Dir {
        /// The device directory.
        dir: PathBuf,
        /// What is wrong.
        what: String,
    },
}

impl From<DevDirError> for String {
    fn from(e: DevDirError) -> Self {
        e.to_string()
    }
}

/// The error about `dir` that says `what`.
fn dir_err(dir: &Path, what: &dyn std::fmt::Display) -> DevDirError {
    DevDirError::Dir {
        dir: dir.to_path_buf(),
        what: what.to_string(),
    }
}

/// The file that marks a directory as a device's: `<pid> <start time>`
/// of the process that made it (start time as `/proc/<pid>/stat` gives it,
/// so that a reused pid is not taken for the device).
pub const MARKER: &str = "device.pid";
/// Every file a device makes in its directory; nothing else is ever
/// removed from it.
pub const DEVICE_FILES: [&str; 4] = [
    crate::device::CONTROL_SOCKET,
    crate::device::STATS_FILE,
    "stats.json.tmp",
    MARKER,
];

fn entry_name(name: &str) -> String {
    enso_abi::devname::entry_name(name)
}

fn cstr(s: &str) -> CString {
    // Names are checked (`check_name`) and the device files are constants:
    // none holds a NUL.
    CString::new(s).expect("no NUL in a checked name")
}

fn stat_at(dirfd: i32, name: &CStr) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is NUL-terminated and outlives the call; `st` is a
    // valid stat to write; AT_SYMLINK_NOFOLLOW makes a link be described,
    // not followed.
    if unsafe { libc::fstatat(dirfd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn open_dir_at(dirfd: i32, name: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated and outlives the call; O_NOFOLLOW
    // refuses a link at the last component and O_DIRECTORY anything but a
    // directory.
    let fd = unsafe {
        libc::openat(
            dirfd,
            name.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn kind(mode: u32) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFLNK => "symbolic link",
        libc::S_IFREG => "regular file",
        libc::S_IFDIR => "directory",
        libc::S_IFSOCK => "socket",
        libc::S_IFIFO => "FIFO",
        _ => "special file",
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The start time of process `pid` (field 22 of `/proc/<pid>/stat`), if it
/// runs.
fn start_time(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces:
    // count fields from after its closing parenthesis (field 3 onwards).
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn marker_text() -> String {
    let pid = std::process::id();
    format!("{pid} {}\n", start_time(pid).unwrap_or(0))
}

/// Whether a marker's text names a process that still runs. A marker that
/// cannot be read as one names no process that can be shown dead: it counts
/// as live, so the directory is kept.
fn marker_is_live(text: &str) -> bool {
    let mut it = text.split_whitespace();
    let (Some(pid), Some(start)) = (it.next(), it.next()) else {
        return true;
    };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return true;
    };
    start_time(pid) == Some(start)
}

/// Makes the directory of device `name` under `parent`, reclaiming a dead
/// device's directory there (see the module's documentation); returns its
/// path. Every refusal is one line naming the path and what is wrong.
pub fn create(parent: &Path, name: &str) -> Result<PathBuf, DevDirError> {
    check_name(name).map_err(DevDirError::Name)?;
    let dir = parent.join(entry_name(name));
    let err = |what: &dyn std::fmt::Display| dir_err(&dir, what);
    let not_dir = || DevDirError::NoParent(parent.to_path_buf());
    let pfile = File::open(parent).map_err(|_| not_dir())?;
    let pmeta = pfile.metadata().map_err(|_| not_dir())?;
    if !pmeta.is_dir() {
        return Err(not_dir());
    }
    if pmeta.mode() & 0o022 != 0 && pmeta.mode() & libc::S_ISVTX == 0 {
        return Err(DevDirError::UnsafeParent {
            parent: parent.to_path_buf(),
            mode: pmeta.mode() & 0o7777,
        });
    }
    let pfd = pfile.as_raw_fd();
    let cname = cstr(&entry_name(name));
    // Two tries: the second follows the reclaim of a dead device's
    // directory.
    for _ in 0..2 {
        // Noted before it is made, so that a signal never finds it made but
        // not noted.
        crate::cleanup::register(&dir);
        // SAFETY: `cname` is NUL-terminated and outlives the call; mkdirat
        // never follows a link at the last component (EEXIST instead).
        if unsafe { libc::mkdirat(pfd, cname.as_ptr(), 0o700) } == 0 {
            return finish(pfd, &cname, &dir).inspect_err(|_| {
                remove(&dir);
            });
        }
        let e = io::Error::last_os_error();
        crate::cleanup::unregister(&dir);
        if e.raw_os_error() != Some(libc::EEXIST) {
            return Err(err(&e));
        }
        reclaim(pfd, &cname, &dir, name)?;
    }
    Err(err(&"appeared again while it was being reclaimed"))
}

/// Checks the directory just made (ours, a directory, mode 0700 once the
/// umask is undone) and writes its marker.
fn finish(pfd: i32, cname: &CStr, dir: &Path) -> Result<PathBuf, DevDirError> {
    let err = |what: &dyn std::fmt::Display| dir_err(dir, what);
    let fd = open_dir_at(pfd, cname).map_err(|e| err(&e))?;
    let meta = File::from(fd.try_clone().map_err(|e| err(&e))?)
        .metadata()
        .map_err(|e| err(&e))?;
    if meta.uid() != euid() {
        return Err(err(&format!(
            "owned by uid {} right after this process made it; refusing it",
            meta.uid()
        )));
    }
    if meta.mode() & 0o7777 != 0o700 {
        // SAFETY: fchmod on a descriptor we own of a directory we made and
        // checked is ours; it follows no path.
        if unsafe { libc::fchmod(fd.as_raw_fd(), 0o700) } != 0 {
            return Err(err(&io::Error::last_os_error()));
        }
    }
    let m = cstr(MARKER);
    // SAFETY: `m` is NUL-terminated; O_EXCL|O_NOFOLLOW create a new file
    // in the directory we hold open, never through a link.
    let mfd = unsafe {
        libc::openat(
            fd.as_raw_fd(),
            m.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        )
    };
    if mfd < 0 {
        return Err(err(&io::Error::last_os_error()));
    }
    // SAFETY: `mfd` was just returned by openat and is owned by nothing else.
    let mut mf = unsafe { File::from_raw_fd(mfd) };
    io::Write::write_all(&mut mf, marker_text().as_bytes()).map_err(|e| err(&e))?;
    Ok(dir.to_path_buf())
}

/// Removes the existing entry `cname` of `pfd` if it is a dead device's
/// directory of ours; otherwise says why it stays.
fn reclaim(pfd: i32, cname: &CStr, dir: &Path, name: &str) -> Result<(), DevDirError> {
    let err = |what: &dyn std::fmt::Display| dir_err(dir, what);
    let st = match stat_at(pfd, cname) {
        Ok(st) => st,
        // Gone since mkdirat said it exists: try again.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(err(&e)),
    };
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(err(&format!(
            "exists and is a {}, not a device directory; not touching it (remove it yourself if it is yours)",
            kind(st.st_mode)
        )));
    }
    if st.st_uid != euid() {
        return Err(err(&format!(
            "exists and belongs to uid {}, not to this user; not touching it",
            st.st_uid
        )));
    }
    if crate::device::check_running(dir).is_ok() {
        return Err(DevDirError::Running {
            name: name.to_string(),
            dir: dir.to_path_buf(),
        });
    }
    let fd = open_dir_at(pfd, cname).map_err(|e| err(&e))?;
    let mut entries = Vec::new();
    // Listed through the descriptor we hold, not the path.
    let listing =
        std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd())).map_err(|e| err(&e))?;
    for e in listing {
        let e = e.map_err(|e| err(&e))?;
        let n = e.file_name().to_string_lossy().into_owned();
        if !DEVICE_FILES.contains(&n.as_str()) {
            return Err(err(&format!(
                "exists and holds '{n}', which no device makes; not removing it (remove the directory yourself if it is yours)"
            )));
        }
        entries.push(n);
    }
    if !entries.iter().any(|n| n == MARKER) {
        return Err(err(&format!(
            "exists without the {MARKER} a device writes, so it cannot be shown to be a dead device's; not removing it (remove it yourself if it is yours)"
        )));
    }
    let m = cstr(MARKER);
    // SAFETY: `m` is NUL-terminated; O_NOFOLLOW refuses a link.
    let mfd = unsafe {
        libc::openat(
            fd.as_raw_fd(),
            m.as_ptr(),
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if mfd < 0 {
        return Err(err(&io::Error::last_os_error()));
    }
    // SAFETY: `mfd` was just returned by openat and is owned by nothing else.
    let mf = unsafe { File::from_raw_fd(mfd) };
    let mut text = String::new();
    io::Read::read_to_string(&mut io::Read::take(mf, 256), &mut text).map_err(|e| err(&e))?;
    if marker_is_live(&text) {
        return Err(DevDirError::Owned {
            name: name.to_string(),
            pid: text.split_whitespace().next().unwrap_or("?").to_string(),
            dir: dir.to_path_buf(),
        });
    }
    for n in &entries {
        let c = cstr(n);
        // SAFETY: `c` is NUL-terminated; unlinkat removes the entry of the
        // directory we hold open, following no link.
        if unsafe { libc::unlinkat(fd.as_raw_fd(), c.as_ptr(), 0) } != 0 {
            return Err(err(&io::Error::last_os_error()));
        }
    }
    // SAFETY: `cname` is NUL-terminated; AT_REMOVEDIR removes it only if it
    // is an empty directory.
    if unsafe { libc::unlinkat(pfd, cname.as_ptr(), libc::AT_REMOVEDIR) } != 0 {
        return Err(err(&io::Error::last_os_error()));
    }
    Ok(())
}

/// Removes a device directory this process made: the files a device makes,
/// then the directory if nothing else is in it. Never recursive, never
/// following a link.
pub fn remove(dir: &Path) {
    crate::cleanup::unregister(dir);
    remove_files(dir);
}

/// [`remove`], without forgetting `dir` in the list of directories to
/// remove on a signal (for the signal handler, which holds that list).
pub(crate) fn remove_files(dir: &Path) {
    let (Some(parent), Some(leaf)) = (dir.parent(), dir.file_name()) else {
        return;
    };
    let Ok(pfile) = File::open(parent) else {
        return;
    };
    let Ok(leaf) = CString::new(leaf.as_encoded_bytes()) else {
        return;
    };
    let Ok(fd) = open_dir_at(pfile.as_raw_fd(), &leaf) else {
        return;
    };
    for n in DEVICE_FILES {
        let c = cstr(n);
        // SAFETY: `c` is NUL-terminated; unlinkat removes an entry of the
        // directory we hold open, following no link.
        unsafe { libc::unlinkat(fd.as_raw_fd(), c.as_ptr(), 0) };
    }
    // SAFETY: `leaf` is NUL-terminated; AT_REMOVEDIR removes only an empty
    // directory.
    unsafe { libc::unlinkat(pfile.as_raw_fd(), leaf.as_ptr(), libc::AT_REMOVEDIR) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_live_and_a_made_up_start_time_is_not() {
        assert!(marker_is_live(&marker_text()));
        let pid = std::process::id();
        let start = start_time(pid).unwrap();
        assert!(!marker_is_live(&format!("{pid} {}", start + 1)));
        // No process has pid 0 in /proc; unreadable markers count as live.
        assert!(!marker_is_live("4194304000 1"));
        assert!(marker_is_live("garbage"));
        assert!(marker_is_live(""));
    }
}
