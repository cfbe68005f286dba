//! A TAP device: a virtual Ethernet interface whose "wire" is a file
//! descriptor.
//!
//! [`Tap::create`] opens `/dev/net/tun` and asks `TUNSETIFF` for a new
//! device with `IFF_TAP | IFF_NO_PI | IFF_TUN_EXCL`:
//!
//! - `IFF_NO_PI`: each `read`/`write` is exactly one Ethernet frame (without
//!   it every frame carries a 4-byte packet-information header);
//! - `IFF_TUN_EXCL`: the call fails if any interface of that name already
//!   exists (TAP or not, persistent or in use), so an existing device is
//!   never taken over.
//!
//! The device exists as long as the descriptor is open and disappears when
//! the [`Tap`] is dropped. It is created in the network namespace of the
//! calling thread, down and without addresses; [`Tap::set_up`] brings it up,
//! addresses and routes are the caller's business. It may be moved to
//! another namespace (`ip link set NAME netns NS`): the descriptor keeps
//! working (the move takes the device down; bring it up there), but
//! [`Tap::set_up`] then fails, as it works in the namespace of creation.
//!
//! The descriptor is non-blocking; one frame per system call, which limits a
//! TAP to roughly a million frames per second per core. Frames written go
//! into the kernel's receive path as if they came off a wire, so they need
//! valid IP/L4 checksums to be accepted by the local stack.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::{sys, Error};

/// A TAP interface owned by this process.
pub struct Tap {
    fd: OwnedFd,
    /// An `AF_INET` datagram socket in the namespace where the device was
    /// made, for interface ioctls.
    ctl: OwnedFd,
    name: String,
    ifindex: i32,
    mac: [u8; 6],
}

impl Tap {
    /// Creates TAP interface `name` in the calling thread's network
    /// namespace. A name with `%d` lets the kernel pick a free number
    /// (see [`Tap::name`] for the result).
    ///
    /// Fails with [`Error::Interface`] if the name is malformed or an
    /// interface of that name already exists, and with [`Error::Os`] if
    /// `/dev/net/tun` cannot be opened (no TUN support, or no
    /// `CAP_NET_ADMIN`).
    pub fn create(name: &str) -> Result<Tap, Error> {
        sys::check_ifname(name, true)?;
        // SAFETY: the path is a NUL-terminated literal; the result is checked.
        let raw = unsafe {
            libc::open(
                c"/dev/net/tun".as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(Error::os("open /dev/net/tun"));
        }
        // SAFETY: `raw` was just returned by open() and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = sys::ifreq_named(name);
        req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_TUN_EXCL) as i16;
        if let Err(err) = sys::ioctl_ifreq(fd.as_raw_fd(), libc::TUNSETIFF, &mut req, "TUNSETIFF") {
            return Err(match err.raw_os_error() {
                Some(libc::EBUSY) | Some(libc::EEXIST) => Error::Interface {
                    name: name.to_owned(),
                    reason: "an interface of that name already exists",
                },
                _ => err,
            });
        }
        let name = sys::ifreq_name(&req);
        let ctl = sys::socket(libc::AF_INET, libc::SOCK_DGRAM, 0)?;
        let mut req = sys::ifreq_named(&name);
        sys::ioctl_ifreq(
            ctl.as_raw_fd(),
            libc::SIOCGIFINDEX,
            &mut req,
            "SIOCGIFINDEX",
        )?;
        // SAFETY: SIOCGIFINDEX filled the `ifru_ifindex` member of the union.
        let ifindex = unsafe { req.ifr_ifru.ifru_ifindex };
        let mut req = sys::ifreq_named(&name);
        sys::ioctl_ifreq(
            ctl.as_raw_fd(),
            libc::SIOCGIFHWADDR,
            &mut req,
            "SIOCGIFHWADDR",
        )?;
        // SAFETY: SIOCGIFHWADDR filled the `ifru_hwaddr` member of the union.
        let hw = unsafe { req.ifr_ifru.ifru_hwaddr };
        let mut mac = [0u8; 6];
        for (dst, &src) in mac.iter_mut().zip(hw.sa_data.iter()) {
            *dst = src as u8;
        }
        Ok(Tap {
            fd,
            ctl,
            name,
            ifindex,
            mac,
        })
    }

    /// Brings the interface up (`SIOCSIFFLAGS` with `IFF_UP`), in the
    /// namespace where it was created. Fails with [`Error::Interface`] if it
    /// is no longer there (moved to another namespace).
    pub fn set_up(&self) -> Result<(), Error> {
        let mut req = sys::ifreq_named(&self.name);
        let gone = || Error::Interface {
            name: self.name.clone(),
            reason: "no longer in the network namespace it was created in",
        };
        if sys::ioctl_ifreq(
            self.ctl.as_raw_fd(),
            libc::SIOCGIFINDEX,
            &mut req,
            "SIOCGIFINDEX",
        )
        .is_err()
        {
            return Err(gone());
        }
        // SAFETY: SIOCGIFINDEX filled the `ifru_ifindex` member of the union.
        if unsafe { req.ifr_ifru.ifru_ifindex } != self.ifindex {
            return Err(gone());
        }
        let mut req = sys::ifreq_named(&self.name);
        sys::ioctl_ifreq(
            self.ctl.as_raw_fd(),
            libc::SIOCGIFFLAGS,
            &mut req,
            "SIOCGIFFLAGS",
        )?;
        // SAFETY: SIOCGIFFLAGS filled the `ifru_flags` member of the union.
        let flags = unsafe { req.ifr_ifru.ifru_flags };
        req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as i16;
        sys::ioctl_ifreq(
            self.ctl.as_raw_fd(),
            libc::SIOCSIFFLAGS,
            &mut req,
            "SIOCSIFFLAGS",
        )
    }

    /// Reads one frame the kernel sent out of the interface into `buf` and
    /// returns its length. `Ok(None)`: no frame waiting. Make `buf` hold the
    /// largest frame (MTU plus 18 bytes of Ethernet header and VLAN tag): a
    /// longer frame is cut to `buf.len()` bytes and the rest is lost, with
    /// nothing to tell it from a frame of exactly that length.
    pub fn recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, Error> {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::WouldBlock {
                return Ok(None);
            }
            return Err(Error::Os {
                op: "read from TAP",
                source: err,
            });
        }
        Ok(Some(n as usize))
    }

    /// Writes one frame into the kernel as if received from the wire.
    /// `Ok(false)`: the kernel could not take it now. A frame shorter than an
    /// Ethernet header (`EINVAL`), or written while the interface is down
    /// (`EIO`), is an error.
    pub fn send(&mut self, frame: &[u8]) -> Result<bool, Error> {
        // SAFETY: `frame` is valid for reads of `frame.len()` bytes.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len()) };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::WouldBlock {
                return Ok(false);
            }
            return Err(Error::Os {
                op: "write to TAP",
                source: err,
            });
        }
        Ok(true)
    }

    /// Waits up to `timeout_ms` milliseconds (-1: no limit) for a frame to
    /// read.
    pub fn wait_readable(&self, timeout_ms: i32) -> Result<bool, Error> {
        sys::poll_readable(self.fd.as_raw_fd(), timeout_ms)
    }

    /// The interface name (with any `%d` filled in).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The interface's MAC address, as read when it was created (the kernel
    /// picks a random locally administered one).
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The interface index in the namespace where it was created.
    pub fn ifindex(&self) -> u32 {
        self.ifindex as u32
    }
}

impl AsRawFd for Tap {
    /// The TAP descriptor, for an event loop (readable when a frame waits).
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tap")
            .field("name", &self.name)
            .field("ifindex", &self.ifindex)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_are_refused_before_opening() {
        for name in ["", "a/b", "sixteen-chars-xx", "x y", "a:b"] {
            assert!(
                matches!(Tap::create(name), Err(Error::Interface { .. })),
                "{name:?}"
            );
        }
    }
}
