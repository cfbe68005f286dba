//! Small wrappers over the system calls the rest of the crate uses:
//! interface-name checks, `ifreq` ioctls, socket options, and an owned
//! shared memory mapping.

use std::ffi::CString;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use crate::Error;

/// Longest interface name the kernel accepts (`IFNAMSIZ` minus the NUL).
pub(crate) const IFNAME_MAX: usize = libc::IFNAMSIZ - 1;

/// Checks an interface name the way the kernel's `dev_valid_name` does, so a
/// bad name is refused with one clear error before anything is opened.
///
/// `allow_pattern` admits the `%d` the TUN driver expands to a free number.
pub(crate) fn check_ifname(name: &str, allow_pattern: bool) -> Result<(), Error> {
    let reason = if name.is_empty() {
        Some("the name is empty")
    } else if name.len() > IFNAME_MAX {
        Some("the name is longer than 15 bytes")
    } else if name == "." || name == ".." {
        Some("the name is \".\" or \"..\"")
    } else if name.contains('/') {
        Some("the name contains '/'")
    } else if name.contains(':') {
        Some("the name contains ':'")
    } else if name.chars().any(|c| c == '\0' || c.is_whitespace()) {
        Some("the name contains a NUL or white space")
    } else if !allow_pattern && name.contains('%') {
        Some("the name contains '%'")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::Interface {
            name: name.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// The index of interface `name` in the calling thread's network namespace.
pub(crate) fn ifindex(name: &str) -> Result<u32, Error> {
    check_ifname(name, false)?;
    let cname = CString::new(name).map_err(|_| Error::Interface {
        name: name.to_owned(),
        reason: "the name contains a NUL",
    })?;
    // SAFETY: `cname` is a valid NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if index == 0 {
        return Err(Error::Interface {
            name: name.to_owned(),
            reason: "no such interface in this network namespace",
        });
    }
    Ok(index)
}

/// An `ifreq` with its name field set to `name` (already checked to fit).
pub(crate) fn ifreq_named(name: &str) -> libc::ifreq {
    // SAFETY: `ifreq` is plain old data (integers, arrays and a union of
    // such); all-zero bytes are a valid value.
    let mut req: libc::ifreq = unsafe { mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes().take(IFNAME_MAX)) {
        *dst = src as libc::c_char;
    }
    req
}

/// The name stored in an `ifreq` (up to the first NUL).
pub(crate) fn ifreq_name(req: &libc::ifreq) -> String {
    let bytes: Vec<u8> = req
        .ifr_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `ioctl(fd, request, &mut req)` for the `ifreq` family of requests.
pub(crate) fn ioctl_ifreq(
    fd: RawFd,
    request: libc::Ioctl,
    req: &mut libc::ifreq,
    op: &'static str,
) -> Result<(), Error> {
    // SAFETY: every request this crate passes takes a `struct ifreq *`, and
    // `req` is a valid, exclusively borrowed `ifreq` for the whole call.
    let rc = unsafe { libc::ioctl(fd, request, req as *mut libc::ifreq) };
    if rc < 0 {
        return Err(Error::os(op));
    }
    Ok(())
}

/// Opens a socket with `SOCK_CLOEXEC` added to `ty`.
pub(crate) fn socket(
    domain: libc::c_int,
    ty: libc::c_int,
    protocol: libc::c_int,
) -> Result<OwnedFd, Error> {
    // SAFETY: plain system call with integer arguments.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, protocol) };
    if fd < 0 {
        return Err(Error::os("socket"));
    }
    // SAFETY: `fd` was just returned by socket() and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(fd, SOL_PACKET, opt, &value)`.
pub(crate) fn set_packet_opt<T: Copy>(
    fd: &OwnedFd,
    opt: libc::c_int,
    value: &T,
    op: &'static str,
) -> Result<(), Error> {
    // SAFETY: `value` points to a live `T` of `size_of::<T>()` bytes; the
    // kernel only reads that many bytes from it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            opt,
            (value as *const T).cast(),
            mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(Error::os(op));
    }
    Ok(())
}

/// Binds a packet socket to interface `ifindex` for `protocol` (host order;
/// 0 receives nothing).
pub(crate) fn bind_packet(fd: &OwnedFd, ifindex: u32, protocol: u16) -> Result<(), Error> {
    // SAFETY: `sockaddr_ll` is plain old data; all-zero is a valid value.
    let mut addr: libc::sockaddr_ll = unsafe { mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as libc::c_ushort;
    addr.sll_protocol = protocol.to_be();
    addr.sll_ifindex = ifindex as libc::c_int;
    // SAFETY: `addr` is a valid `sockaddr_ll` and the length passed is its size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(Error::os("bind"));
    }
    Ok(())
}

/// The link-layer address a bound packet socket reports: hardware type and
/// the interface's MAC address, read without a second name lookup.
pub(crate) fn packet_sockname(fd: &OwnedFd) -> Result<libc::sockaddr_ll, Error> {
    // SAFETY: `sockaddr_ll` is plain old data; all-zero is a valid value.
    let mut addr: libc::sockaddr_ll = unsafe { mem::zeroed() };
    let mut len = mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: `addr` and `len` are valid for writes; `len` holds the size of
    // `addr`, so the kernel writes at most that many bytes.
    let rc = unsafe {
        libc::getsockname(
            fd.as_raw_fd(),
            (&mut addr as *mut libc::sockaddr_ll).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(Error::os("getsockname"));
    }
    Ok(addr)
}

/// Waits up to `timeout_ms` for `fd` to become readable; `Ok(false)` on
/// timeout (and on `EINTR`, which callers treat like a timeout).
pub(crate) fn poll_readable(fd: RawFd, timeout_ms: i32) -> Result<bool, Error> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pfd` is one valid `pollfd` and the count passed is 1.
    let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(Error::Os {
            op: "poll",
            source: err,
        });
    }
    Ok(rc > 0 && pfd.revents & (libc::POLLIN | libc::POLLERR) != 0)
}

/// The system page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size <= 0 {
        4096
    } else {
        size as usize
    }
}

/// A shared read-write mapping of a packet socket's ring, unmapped on drop.
pub(crate) struct RingMap {
    ptr: NonNull<u8>,
    len: usize,
}

impl RingMap {
    /// Maps `len` bytes of the ring set up on `fd`.
    pub(crate) fn new(fd: &OwnedFd, len: usize) -> Result<RingMap, Error> {
        // SAFETY: a fresh mapping chosen by the kernel (null hint) cannot
        // alias any Rust object; the result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::os("mmap of the packet ring"));
        }
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(Error::Os {
            op: "mmap of the packet ring",
            source: io::Error::other("null mapping"),
        })?;
        Ok(RingMap { ptr, len })
    }

    /// Start of the mapping.
    pub(crate) fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length of the mapping in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for RingMap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping made by `RingMap::new` that
        // is unmapped only here; no references into it outlive `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}
