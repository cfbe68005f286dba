//! Creating the files the NIC and its tools write (a pcap port's capture,
//! pktgen's captures and reports), often as root and often in directories
//! others can write to, such as `/tmp`.
//!
//! [`create`] opens the path once and decides on what it opened: it never
//! follows a symbolic link at the path (`O_NOFOLLOW`), never blocks on a
//! FIFO, and truncates only a regular file of the caller's own with no
//! other name (checked with `fstat` on the descriptor, so nothing can be
//! swapped in between a check and the open). A new file gets mode 0644
//! (less the umask), not 0666.

use std::fs::File;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Mode of a file [`create`] makes, before the umask.
pub const MODE: u32 = 0o644;

/// Creates `path` for writing, or truncates it if it is a regular file of
/// the caller's own with no other hard link; anything else at the path (a
/// symbolic link, even one that points nowhere, a FIFO, a device, another
/// user's file) is refused and left as it is. The error says why, without
/// the path (callers name it).
pub fn create(path: &Path) -> io::Result<File> {
    let refuse = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .mode(MODE)
        // O_NONBLOCK: opening a FIFO nobody reads fails (ENXIO) instead
        // of waiting; O_NOCTTY: a terminal never becomes ours.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| {
            let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            match e.raw_os_error() {
                Some(libc::ELOOP) if link => refuse(
                    "is a symbolic link; refusing to write through it (remove it or name \
                     another file)"
                        .into(),
                ),
                Some(libc::ENXIO) => refuse("is a FIFO or socket nobody reads".into()),
                _ => e,
            }
        })?;
    let m = f.metadata()?;
    if !m.file_type().is_file() {
        return Err(refuse("is not a regular file".into()));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me {
        return Err(refuse(format!(
            "belongs to user {}, not to this one ({me}); refusing to overwrite it",
            m.uid()
        )));
    }
    if m.nlink() > 1 {
        return Err(refuse(format!(
            "has {} names (hard links); refusing to overwrite a file named elsewhere",
            m.nlink()
        )));
    }
    // Back to blocking writes (a regular file ignores the flag; the
    // descriptor is left as an ordinary one), then empty it.
    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
    // SAFETY: `fd` is open (`f` owns it); F_GETFL takes no argument.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above; F_SETFL takes an int.
    if fl < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    f.set_len(0)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The process's umask, read without changing it.
    fn umask() -> u32 {
        let s = std::fs::read_to_string("/proc/self/status").unwrap();
        let l = s.lines().find(|l| l.starts_with("Umask:")).unwrap();
        u32::from_str_radix(l["Umask:".len()..].trim(), 8).unwrap()
    }

    #[test]
    fn a_new_file_is_0644_and_an_own_file_is_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.pcap");
        std::fs::write(&p, b"old contents").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        drop(create(&p).unwrap());
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(m.len(), 0, "truncated");
        assert_eq!(m.mode() & 0o777, 0o600, "an existing file keeps its mode");
        std::fs::remove_file(&p).unwrap();
        use std::io::Write;
        create(&p).unwrap().write_all(b"new").unwrap();
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(m.mode() & 0o7777, MODE & !umask());
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
    }

    #[test]
    fn links_fifos_and_files_named_twice_are_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let target = d.join("precious");
        std::fs::write(&target, b"keep me").unwrap();
        std::os::unix::fs::symlink(&target, d.join("link")).unwrap();
        std::os::unix::fs::symlink(d.join("nowhere"), d.join("dangling")).unwrap();
        std::fs::hard_link(&target, d.join("second-name")).unwrap();
        let fifo = std::ffi::CString::new(d.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        for (name, says) in [
            ("link", "symbolic link"),
            ("dangling", "symbolic link"),
            ("second-name", "hard links"),
            ("fifo", "FIFO"),
        ] {
            let e = create(&d.join(name)).expect_err(name).to_string();
            assert!(e.contains(says), "{name}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
        assert!(!d.join("nowhere").exists(), "made through a dangling link");
        // Another user's file (root can give one away; others cannot).
        let theirs = d.join("theirs");
        std::fs::write(&theirs, b"theirs").unwrap();
        if std::os::unix::fs::chown(&theirs, Some(65534), None).is_ok() {
            let e = create(&theirs).unwrap_err().to_string();
            assert!(e.contains("belongs to user 65534"), "{e}");
            assert_eq!(std::fs::read(&theirs).unwrap(), b"theirs");
        }
        assert!(create(d).unwrap_err().to_string().contains("directory"));
    }
}
