//! Shared memory: the regions (memfd mappings) that hold rings and packet
//! buffers, bounds-checked access into them, and the eventfds that come
//! with each ring.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

/// Largest region a peer may register: descriptor offsets are 32-bit.
pub const MAX_REGION_BYTES: u64 = 1 << 32;

/// One mapped region.
pub(crate) struct Region {
    ptr: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: a Region exclusively owns its mapping and fd; nothing in it is
// tied to the thread that created it, so it may move to another thread.
unsafe impl Send for Region {}

/// Why a peer's region was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RegionError {
    #[error("region size {0} is zero or above 4 GiB (descriptor offsets are 32-bit)")]
    BadSize(u64),
    #[error("region file is not a memfd or shared-memory file")]
    NotShm,
    #[error("region file is {file} bytes, smaller than the {claimed} announced")]
    TooSmall { file: u64, claimed: u64 },
    #[error("region file is not sealed against shrinking")]
    Unsealed,
    #[error("{0}: {1}")]
    Os(&'static str, io::Error),
}

fn mmap_shared(fd: RawFd, len: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: a fresh shared mapping of `fd`; the kernel picks the address,
    // so no existing memory is affected.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap returned null"))
}

impl Region {
    /// Creates a zeroed region of `len` bytes backed by a memfd sealed
    /// against shrinking (as DPDK does), so the peer can rely on it.
    pub fn create(len: usize) -> io::Result<Region> {
        // SAFETY: the name is a valid NUL-terminated string; the returned fd
        // is new and owned by us.
        let fd = unsafe {
            libc::memfd_create(
                c"memif-region".as_ptr(),
                libc::MFD_ALLOW_SEALING | libc::MFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just created and nobody else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: plain syscalls on our own fd.
        unsafe {
            if libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) < 0
                || libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) < 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        let ptr = mmap_shared(fd.as_raw_fd(), len)?;
        Ok(Region { ptr, len, fd })
    }

    /// Maps a region the peer sent: its file must be a memfd, tmpfs or
    /// hugetlbfs file (memory, so that no access to it waits on anyone),
    /// at least `size` bytes, `size` at most [`MAX_REGION_BYTES`], and,
    /// unless `allow_unsealed`, sealed against shrinking, so that no
    /// access within `size` can fault.
    pub fn map(fd: OwnedFd, size: u64, allow_unsealed: bool) -> Result<Region, RegionError> {
        if size == 0 || size > MAX_REGION_BYTES {
            return Err(RegionError::BadSize(size));
        }
        // First, without asking the file's filesystem anything (a FUSE or
        // network file could make any such call wait forever): only
        // shared-memory files (memfd, tmpfs, hugetlbfs) have seals, so
        // F_GET_SEALS fails on anything else (EINVAL).
        // SAFETY: fcntl F_GET_SEALS only reads the fd's seals.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        if seals < 0 {
            return Err(RegionError::NotShm);
        }
        // SAFETY: stat is plain old data; fstat fills it for a valid fd.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fd is a valid open descriptor; st is writable.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } < 0 {
            return Err(RegionError::Os("fstat", io::Error::last_os_error()));
        }
        let file = st.st_size.max(0) as u64;
        if file < size {
            return Err(RegionError::TooSmall {
                file,
                claimed: size,
            });
        }
        if (st.st_mode & libc::S_IFMT) != libc::S_IFREG {
            return Err(RegionError::NotShm);
        }
        if !allow_unsealed && seals & libc::F_SEAL_SHRINK == 0 {
            return Err(RegionError::Unsealed);
        }
        let len = size as usize;
        let ptr = mmap_shared(fd.as_raw_fd(), len).map_err(|e| RegionError::Os("mmap", e))?;
        Ok(Region { ptr, len, fd })
    }

    /// Bytes mapped.
    pub fn len(&self) -> u64 {
        self.len as u64
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Pointer to `len` bytes at `offset`, or `None` unless the whole range
    /// lies inside the region. Computed in u64, so nothing overflows.
    #[inline]
    pub fn range(&self, offset: u64, len: u64) -> Option<*mut u8> {
        let end = offset.checked_add(len)?;
        if end > self.len as u64 {
            return None;
        }
        // SAFETY: offset <= end <= self.len, so the result stays within
        // (or one past the end of) the mapping.
        Some(unsafe { self.ptr.as_ptr().add(offset as usize) })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly the mapping made in create/map, and
        // nothing borrows it any more (rings and buffers referring to it are
        // owned by the same session and dropped with it).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// Bounds-checked access to a peer's set of regions, by descriptor fields.
#[inline]
pub(crate) fn buffer(regions: &[Region], region: u16, offset: u32, len: u32) -> Option<*mut u8> {
    regions
        .get(usize::from(region))?
        .range(u64::from(offset), u64::from(len))
}

/// A non-blocking eventfd.
pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the returned fd is new and owned by us.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just created and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Signals an eventfd (adds 1). Failures (a full counter, or a peer that
/// sent something that is not an eventfd) are ignored: the peer polls too.
pub(crate) fn kick(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to a descriptor we own.
    let _ = unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// Empties an eventfd without blocking.
pub(crate) fn drain(fd: RawFd) {
    let mut v: u64 = 0;
    // SAFETY: reads at most 8 bytes into a live u64; the fd is non-blocking
    // if it is the eventfd we expect (one from a peer could block: see the
    // caller, which makes it non-blocking first).
    let _ = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
}

/// Checks that a descriptor a peer sent as a ring's eventfd is one (and
/// not a pipe, socket or file whose reads or writes could wait), without
/// touching the file itself: the kernel names eventfds
/// `anon_inode:[eventfd]` under /proc/self/fd. Then makes it
/// non-blocking.
pub(crate) fn check_eventfd(fd: RawFd) -> Result<(), String> {
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .map_err(|e| format!("cannot tell what the ring's eventfd is (/proc: {e})"))?;
    if link.as_os_str() != "anon_inode:[eventfd]" {
        return Err(format!(
            "the ring's eventfd is not an eventfd ({})",
            link.display()
        ));
    }
    set_nonblocking(fd).map_err(|e| format!("bad eventfd: {e}"))
}

/// Makes a descriptor received from a peer non-blocking, so that reading or
/// writing it can never stall the engine.
pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on an fd we own; only changes its status flags.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_checked() {
        let r = Region::create(4096).unwrap();
        assert!(r.range(0, 4096).is_some());
        assert!(r.range(4095, 1).is_some());
        assert!(r.range(4096, 0).is_some());
        assert!(r.range(4096, 1).is_none());
        assert!(r.range(u64::MAX, 2).is_none());
        let regions = [r];
        assert!(buffer(&regions, 0, 2048, 2048).is_some());
        assert!(buffer(&regions, 0, 2049, 2048).is_none());
        assert!(buffer(&regions, 1, 0, 1).is_none());
        assert!(buffer(&regions, 0, u32::MAX, u32::MAX).is_none());
    }

    #[test]
    fn peer_regions_must_be_big_enough_and_sealed() {
        let ours = Region::create(8192).unwrap();
        let dup = |r: &Region| {
            // SAFETY: dup of a valid fd; the copy is new and owned by us.
            unsafe { OwnedFd::from_raw_fd(libc::dup(r.fd())) }
        };
        assert!(Region::map(dup(&ours), 8192, false).is_ok());
        assert!(matches!(
            Region::map(dup(&ours), 8193, false),
            Err(RegionError::TooSmall { .. })
        ));
        assert!(matches!(
            Region::map(dup(&ours), 0, false),
            Err(RegionError::BadSize(0))
        ));
        // SAFETY: a new memfd, owned here; not sealed.
        let f = unsafe { OwnedFd::from_raw_fd(libc::memfd_create(c"t".as_ptr(), 0)) };
        // SAFETY: sizes our own file.
        assert_eq!(unsafe { libc::ftruncate(f.as_raw_fd(), 4096) }, 0);
        assert!(matches!(
            Region::map(f.try_clone().unwrap(), 4096, false),
            Err(RegionError::Unsealed)
        ));
        assert!(Region::map(f, 4096, true).is_ok());
        // A file on disk is not memory, sealed or not.
        let disk = tempfile::tempfile_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        disk.set_len(4096).unwrap();
        assert!(matches!(
            Region::map(OwnedFd::from(disk), 4096, true),
            Err(RegionError::NotShm)
        ));
        assert!(matches!(
            Region::map(dup(&ours), (1 << 32) + 1, false),
            Err(RegionError::BadSize(_))
        ));
    }

    #[test]
    fn mappings_share_memory() {
        let a = Region::create(4096).unwrap();
        // SAFETY: dup of a valid fd; the copy is new and owned by us.
        let b = Region::map(
            unsafe { OwnedFd::from_raw_fd(libc::dup(a.fd())) },
            4096,
            false,
        )
        .unwrap();
        // SAFETY: both pointers are in bounds of live mappings of one file.
        unsafe {
            *a.range(100, 1).unwrap() = 42;
            assert_eq!(*b.range(100, 1).unwrap(), 42);
        }
    }
}
