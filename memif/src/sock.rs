//! The control channel's sockets: non-blocking `SOCK_SEQPACKET` Unix
//! sockets, filesystem or abstract, and file descriptors passed with
//! `SCM_RIGHTS`.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::PathBuf;

use crate::msg::MSG_SIZE;
use crate::{MemifError, SocketName};

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// The `sockaddr_un` and its length for `name`. Abstract names get exactly
/// their own bytes after the leading NUL (no padding), as DPDK and libmemif
/// bind them.
pub(crate) fn sockaddr(
    name: &SocketName,
) -> Result<(libc::sockaddr_un, libc::socklen_t), MemifError> {
    // SAFETY: sockaddr_un is plain old data; all-zero is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let base = std::mem::offset_of!(libc::sockaddr_un, sun_path);
    let cap = addr.sun_path.len();
    let (bytes, start, extra): (&[u8], usize, usize) = match name {
        // A path is NUL-terminated.
        SocketName::Path(p) => (p.as_os_str().as_bytes(), 0, 1),
        // An abstract name starts after a NUL and is not terminated.
        SocketName::Abstract(n) => (n.as_bytes(), 1, 0),
    };
    if bytes.is_empty() || bytes.contains(&0) || start + bytes.len() + extra > cap {
        return Err(MemifError::Config(format!(
            "socket name {name} must be 1..={} bytes without NUL",
            cap - 1
        )));
    }
    for (i, &b) in bytes.iter().enumerate() {
        addr.sun_path[start + i] = b as libc::c_char;
    }
    let len = base + start + bytes.len() + extra;
    Ok((addr, len as libc::socklen_t))
}

fn seqpacket() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the returned fd is new and owned by us.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: fd was just returned by socket() and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn connect_fd(name: &SocketName) -> Result<OwnedFd, MemifError> {
    let (addr, len) = sockaddr(name)?;
    let fd = seqpacket().map_err(|e| MemifError::io("socket", e))?;
    // SAFETY: addr is a valid sockaddr_un of at least `len` bytes.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len,
        )
    };
    cvt(r).map_err(|e| MemifError::io("connect", e))?;
    Ok(fd)
}

/// What one non-blocking receive gave.
pub(crate) enum Recv {
    /// Nothing queued.
    WouldBlock,
    /// The peer closed the connection.
    Eof,
    /// A message of `len` bytes (possibly not 128: the caller checks), and
    /// the first file descriptor that came with it. `truncated` is set when
    /// the message or its control data did not fit.
    Msg {
        len: usize,
        fd: Option<OwnedFd>,
        truncated: bool,
    },
}

/// A connected control channel.
pub(crate) struct SeqPacket {
    fd: OwnedFd,
}

impl SeqPacket {
    /// Connects (without blocking: a Unix socket either connects at once or
    /// fails, e.g. with ENOENT / ECONNREFUSED / EAGAIN).
    pub fn connect(name: &SocketName) -> Result<SeqPacket, MemifError> {
        Ok(SeqPacket {
            fd: connect_fd(name)?,
        })
    }

    /// Sends one message, with `fd` attached through SCM_RIGHTS if given.
    /// Never blocks: a full socket buffer is an error (the handshake is
    /// lockstep, so the peer never has more than one message unread).
    pub fn send(&self, msg: &[u8; MSG_SIZE], fd: Option<RawFd>) -> io::Result<()> {
        let mut iov = libc::iovec {
            iov_base: msg.as_ptr() as *mut libc::c_void,
            iov_len: msg.len(),
        };
        // u64 elements keep the control buffer aligned for cmsghdr.
        let mut ctl = [0u64; 4];
        // SAFETY: msghdr is plain old data; all-zero is valid.
        let mut mh: libc::msghdr = unsafe { zeroed() };
        mh.msg_iov = &mut iov;
        mh.msg_iovlen = 1;
        if let Some(fd) = fd {
            // SAFETY: CMSG_SPACE only computes a size.
            let space = unsafe { libc::CMSG_SPACE(size_of::<RawFd>() as u32) } as usize;
            debug_assert!(space <= size_of::<[u64; 4]>());
            mh.msg_control = ctl.as_mut_ptr().cast();
            mh.msg_controllen = space as _;
            // SAFETY: msg_control points at `space` writable, aligned bytes,
            // enough for one cmsghdr carrying one int, so CMSG_FIRSTHDR is
            // non-null and CMSG_DATA has room for the fd.
            unsafe {
                let c = libc::CMSG_FIRSTHDR(&mh);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN(size_of::<RawFd>() as u32) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
            }
        }
        // SAFETY: mh points at live iovec/control buffers for the call.
        let n = unsafe {
            libc::sendmsg(
                self.fd.as_raw_fd(),
                &mh,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n as usize != msg.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "short control message send",
            ));
        }
        Ok(())
    }

    /// The user id of the process at the other end, as the kernel recorded
    /// it when the connection was made (SO_PEERCRED).
    pub fn peer_uid(&self) -> io::Result<u32> {
        // SAFETY: ucred is plain old data; all-zero is valid.
        let mut cred: libc::ucred = unsafe { zeroed() };
        let mut len = size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: cred/len point at a live ucred and its size.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&mut cred as *mut libc::ucred).cast(),
                &mut len,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(cred.uid)
    }

    /// Receives one message into `buf` without blocking. `buf` should be
    /// longer than a message so that an over-long one shows as truncated.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Recv> {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // Room for a few fds and credentials; u64 keeps it aligned.
        let mut ctl = [0u64; 16];
        // SAFETY: msghdr is plain old data; all-zero is valid.
        let mut mh: libc::msghdr = unsafe { zeroed() };
        mh.msg_iov = &mut iov;
        mh.msg_iovlen = 1;
        mh.msg_control = ctl.as_mut_ptr().cast();
        mh.msg_controllen = size_of::<[u64; 16]>() as _;
        // SAFETY: mh points at live, writable buffers of the given sizes.
        let n = unsafe {
            libc::recvmsg(
                self.fd.as_raw_fd(),
                &mut mh,
                libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock => Ok(Recv::WouldBlock),
                io::ErrorKind::Interrupted => Ok(Recv::WouldBlock),
                _ if e.raw_os_error() == Some(libc::ECONNRESET) => Ok(Recv::Eof),
                _ => Err(e),
            };
        }
        let mut first: Option<OwnedFd> = None;
        // SAFETY: the kernel filled msg_control/msg_controllen; the CMSG_*
        // walkers stay within msg_controllen, and SCM_RIGHTS payloads are
        // arrays of ints of (cmsg_len - CMSG_LEN(0)) bytes, each a new fd
        // that this process now owns.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&mh);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(c).cast::<RawFd>();
                    let bytes = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    for i in 0..bytes / size_of::<RawFd>() {
                        let fd = OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i)));
                        // Keep the first; any extra is closed on drop.
                        if first.is_none() {
                            first = Some(fd);
                        }
                    }
                }
                c = libc::CMSG_NXTHDR(&mh, c);
            }
        }
        if n == 0 && first.is_none() {
            return Ok(Recv::Eof);
        }
        let truncated = mh.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0;
        Ok(Recv::Msg {
            len: n as usize,
            fd: first,
            truncated,
        })
    }
}

/// A listening control socket. A filesystem socket file made by `bind` is
/// removed on drop, if the path still names the same file.
pub(crate) struct Listener {
    fd: OwnedFd,
    /// Path and (device, inode) of the socket file we created.
    owned_path: Option<(PathBuf, u64, u64)>,
}

impl Listener {
    /// Binds and listens. An existing filesystem entry is replaced only if
    /// it is a socket nobody listens on (a stale one); a live socket gives
    /// `AddrInUse`, any other file `NotASocket`.
    pub fn bind(name: &SocketName) -> Result<Listener, MemifError> {
        let (addr, len) = sockaddr(name)?;
        if let SocketName::Path(p) = name {
            if let Ok(meta) = std::fs::symlink_metadata(p) {
                if !meta.file_type().is_socket() {
                    return Err(MemifError::NotASocket(p.clone()));
                }
                match connect_fd(name) {
                    Ok(_) => return Err(MemifError::AddrInUse(name.to_string())),
                    Err(MemifError::Io { source, .. })
                        if source.raw_os_error() == Some(libc::ECONNREFUSED) =>
                    {
                        std::fs::remove_file(p)
                            .map_err(|e| MemifError::io("removing stale socket", e))?;
                    }
                    // EAGAIN: someone listens with a full backlog.
                    Err(_) => return Err(MemifError::AddrInUse(name.to_string())),
                }
            }
        }
        let fd = seqpacket().map_err(|e| MemifError::io("socket", e))?;
        // SAFETY: addr is a valid sockaddr_un of at least `len` bytes.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_un).cast(),
                len,
            )
        };
        cvt(r).map_err(|e| match e.raw_os_error() {
            Some(libc::EADDRINUSE) => MemifError::AddrInUse(name.to_string()),
            _ => MemifError::io("bind", e),
        })?;
        let owned_path = match name {
            SocketName::Path(p) => {
                let m =
                    std::fs::symlink_metadata(p).map_err(|e| MemifError::io("stat socket", e))?;
                Some((p.clone(), m.dev(), m.ino()))
            }
            SocketName::Abstract(_) => None,
        };
        let l = Listener { fd, owned_path };
        // SAFETY: plain syscall on our socket.
        cvt(unsafe { libc::listen(l.fd.as_raw_fd(), 8) })
            .map_err(|e| MemifError::io("listen", e))?;
        Ok(l)
    }

    /// Accepts one pending connection, if any.
    pub fn accept(&self) -> io::Result<Option<SeqPacket>> {
        // SAFETY: plain syscall; a returned fd is new and owned by us.
        let r = unsafe {
            libc::accept4(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) | Some(libc::ECONNABORTED) => Ok(None),
                _ => Err(e),
            };
        }
        // SAFETY: r is a new fd returned by accept4, owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(r) };
        Ok(Some(SeqPacket { fd }))
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some((path, dev, ino)) = &self.owned_path {
            if let Ok(m) = std::fs::symlink_metadata(path) {
                if m.dev() == *dev && m.ino() == *ino {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abstract_address_has_no_padding() {
        let (a, len) = sockaddr(&SocketName::Abstract("ab".into())).unwrap();
        assert_eq!(len as usize, 2 + 1 + 2);
        assert_eq!(
            (a.sun_path[0], a.sun_path[1], a.sun_path[2]),
            (0, b'a' as _, b'b' as _)
        );
        let (_, len) = sockaddr(&SocketName::Path("/x".into())).unwrap();
        assert_eq!(len as usize, 2 + 2 + 1);
        assert!(sockaddr(&SocketName::Abstract(String::new())).is_err());
        assert!(sockaddr(&SocketName::Abstract("a\0b".into())).is_err());
    }

    #[test]
    fn fds_travel_with_messages() {
        let dir = tempfile::tempdir().unwrap();
        let name = SocketName::Path(dir.path().join("s"));
        let l = Listener::bind(&name).unwrap();
        let c = SeqPacket::connect(&name).unwrap();
        let s = l.accept().unwrap().expect("pending connection");
        let file = std::fs::File::open("/dev/null").unwrap();
        c.send(&[7u8; MSG_SIZE], Some(file.as_raw_fd())).unwrap();
        let mut buf = [0u8; MSG_SIZE + 1];
        match s.recv(&mut buf).unwrap() {
            Recv::Msg { len, fd, truncated } => {
                assert_eq!((len, truncated), (MSG_SIZE, false));
                assert!(fd.is_some());
                assert_eq!(buf[0], 7);
            }
            _ => panic!("expected a message"),
        }
        assert!(matches!(s.recv(&mut buf).unwrap(), Recv::WouldBlock));
        drop(c);
        assert!(matches!(s.recv(&mut buf).unwrap(), Recv::Eof));
    }

    #[test]
    fn bind_refuses_files_and_live_sockets_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"keep me").unwrap();
        assert!(matches!(
            Listener::bind(&SocketName::Path(file.clone())),
            Err(MemifError::NotASocket(_))
        ));
        assert_eq!(std::fs::read(&file).unwrap(), b"keep me");

        let sock = SocketName::Path(dir.path().join("s"));
        let l = Listener::bind(&sock).unwrap();
        assert!(matches!(
            Listener::bind(&sock),
            Err(MemifError::AddrInUse(_))
        ));
        drop(l);
        assert!(
            !dir.path().join("s").exists(),
            "socket file removed on drop"
        );

        // A stale socket file (bound, never listening) is replaced.
        let stale = std::os::unix::net::UnixDatagram::bind(dir.path().join("s")).unwrap();
        drop(stale);
        let _l = Listener::bind(&sock).unwrap();
    }
}
