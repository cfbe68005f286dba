//! Shared-memory files and mappings: the only module of the NIC side that
//! talks to the OS about memory.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::ptr::NonNull;

use memmap2::{MmapOptions, MmapRaw};

/// Creates a new shared-memory file readable and writable by its owner only
/// (mode 0600), sized `len` bytes (sparse: tmpfs allocates pages on touch).
pub fn create_file(path: &Path, len: usize) -> io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.set_len(len as u64)?;
    Ok(f)
}

/// A shared-memory file that no one can shrink or grow: an anonymous
/// `memfd`, sealed once sized. The engine keeps it open for as long as the
/// application is attached; other processes of the same user open it by
/// [`SealedFile::path`].
///
/// Sealed, because a file that an application could shrink would make the
/// engine's next access past the new end fault (SIGBUS) and end the device
/// process; the files of [`create_file`] on a tmpfs cannot be sealed.
#[derive(Debug)]
pub struct SealedFile {
    file: File,
    path: std::path::PathBuf,
}

impl SealedFile {
    /// Creates one of `len` bytes (sparse), named `name` for diagnostics
    /// (`/proc/<pid>/fd` shows it), readable and writable by its owner only.
    pub fn create(name: &str, len: usize) -> io::Result<Self> {
        let cname = std::ffi::CString::new(name)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a file name"))?;
        // SAFETY: `cname` is a valid NUL-terminated string that outlives the
        // call; the flags are memfd_create's own.
        let fd = unsafe {
            libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by memfd_create and is owned by
        // nothing else; `File` takes it over and closes it.
        let file = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        file.set_len(len as u64)?;
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        // SAFETY: fcntl on a descriptor `file` owns, with an integer argument.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let path = format!("/proc/{}/fd/{}", std::process::id(), file.as_raw_fd()).into();
        Ok(SealedFile { file, path })
    }

    /// The file, to map.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Where another process opens it (while this value lives).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Opens an existing shared-memory file for reading and writing.
pub fn open_file(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

/// Maps `len` bytes of `file` shared, read-write.
pub fn map(file: &File, len: usize) -> io::Result<MmapRaw> {
    MmapOptions::new().len(len).map_raw(file)
}

/// A ring buffer mapped twice, back to back, so that a span that wraps past
/// the end of the ring is one contiguous slice in virtual memory.
///
/// memmap2 cannot place a mapping at a fixed address, which this needs, so it
/// is done with libc directly: reserve `2 * len` of address space, then map
/// the same file range over both halves with `MAP_FIXED`.
#[derive(Debug)]
pub struct MirrorMap {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory owned by this value; moving the
// owner between threads does not affect it.
unsafe impl Send for MirrorMap {}
// SAFETY: `&MirrorMap` only exposes the base pointer and length; all access
// through the pointer is by the caller's own synchronisation protocol.
unsafe impl Sync for MirrorMap {}

impl MirrorMap {
    /// Maps `file[offset..offset + len]` twice. `offset` and `len` must be
    /// multiples of the page size.
    pub fn new(file: &File, offset: usize, len: usize) -> io::Result<Self> {
        if len == 0
            || !len.is_multiple_of(crate::layout::PAGE)
            || !offset.is_multiple_of(crate::layout::PAGE)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "mirrored mapping needs page-aligned offset and length",
            ));
        }
        // SAFETY: an anonymous PROT_NONE reservation at an address the kernel
        // chooses touches no existing mapping.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        for half in 0..2 {
            // SAFETY: `base + half * len .. + len` lies inside the reservation
            // made above, which this value owns; MAP_FIXED replaces only it.
            let p = unsafe {
                libc::mmap(
                    (base as *mut u8).add(half * len) as *mut libc::c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_FIXED,
                    file.as_raw_fd(),
                    offset as libc::off_t,
                )
            };
            if p == libc::MAP_FAILED {
                let e = io::Error::last_os_error();
                // SAFETY: unmapping our own reservation.
                unsafe { libc::munmap(base, 2 * len) };
                return Err(e);
            }
        }
        Ok(Self {
            base: NonNull::new(base as *mut u8).expect("mmap returned null"),
            len,
        })
    }

    /// Start of the first copy.
    pub fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// Length of one copy (the ring size).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for MirrorMap {
    fn drop(&mut self) {
        // SAFETY: `base..base + 2 * len` is the reservation this value made
        // and owns; nothing borrows it once the owner is dropped.
        unsafe { libc::munmap(self.base.as_ptr() as *mut libc::c_void, 2 * self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_map_aliases_both_halves() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ring");
        let f = create_file(&path, 3 * 4096).unwrap();
        let m = MirrorMap::new(&f, 4096, 8192).unwrap();
        let p = m.as_ptr();
        // SAFETY: both addresses are inside the 16 KiB mirrored mapping.
        unsafe {
            p.add(8190).write(7);
            assert_eq!(p.add(8190 + 8192).read(), 7);
            p.add(8192 + 3).write(9);
            assert_eq!(p.add(3).read(), 9);
        }
        let whole = map(&f, 3 * 4096).unwrap();
        // SAFETY: offset 4096 + 3 lies inside the 12 KiB mapping.
        assert_eq!(unsafe { whole.as_ptr().add(4096 + 3).read() }, 9);
        assert!(MirrorMap::new(&f, 100, 4096).is_err());
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}
