//! What an endpoint is asked to be: role, socket, sizes.

use std::path::PathBuf;

use crate::MemifError;

/// Which side of the control channel this endpoint takes. The server
/// listens and maps what the client offers; the client connects and
/// allocates the shared memory (copy mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Server,
    Client,
}

/// The control socket's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketName {
    /// A filesystem path.
    Path(PathBuf),
    /// A Linux abstract socket: the address is a NUL byte followed by this
    /// name (exactly, no padding), which is what DPDK binds by default.
    Abstract(String),
}

impl SocketName {
    /// `"@name"` is the abstract socket `name`; anything else is a path.
    pub fn parse(s: &str) -> SocketName {
        match s.strip_prefix('@') {
            Some(name) => SocketName::Abstract(name.to_owned()),
            None => SocketName::Path(PathBuf::from(s)),
        }
    }
}

impl std::fmt::Display for SocketName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SocketName::Path(p) => write!(f, "{}", p.display()),
            SocketName::Abstract(n) => write!(f, "@{n}"),
        }
    }
}

/// Largest ring accepted or offered: 2^14 descriptors (DPDK's limit too).
pub const MAX_LOG2_RING_SIZE: u8 = 14;
/// Most rings per direction.
pub const MAX_RINGS: u16 = 255;

/// An endpoint's configuration. Build it with [`Config::new`] and change
/// the fields that differ from the defaults.
#[derive(Debug, Clone)]
pub struct Config {
    /// The control socket.
    pub socket: SocketName,
    pub role: Role,
    /// Interface id: a client asks for it in INIT; a server accepts only
    /// that id. Default 0.
    pub id: u32,
    /// Rings (queues) per direction. A client offers
    /// `min(rings, what the server's HELLO allows)`; a server accepts up to
    /// this many per direction. Default 1.
    pub rings: u16,
    /// log2 of the descriptors per ring the client allocates (a server
    /// accepts any size up to 2^14). Default 10.
    pub log2_ring_size: u8,
    /// Bytes per packet buffer the client allocates. Default 2048. Use at
    /// least 2048 with a DPDK server, which writes up to one mbuf's data
    /// room (2048) into a buffer without looking at its length.
    pub buffer_size: u32,
    /// Optional shared secret (at most 23 bytes; DPDK's and VPP's
    /// `secret=`): a client sends it in INIT; a server with a secret
    /// refuses clients that do not send it ("Incorrect secret").
    pub secret: Option<String>,
    /// This endpoint's name, sent in HELLO / INIT / CONNECT(ED). At most 31
    /// bytes are sent.
    pub name: String,
    /// Longest frame handled, in bytes. Received frames made of chained
    /// buffers are reassembled up to this size; longer ones, received or
    /// offered for sending, are dropped and counted as `oversize`.
    /// Default 9216.
    pub max_frame: u32,
    /// A server maps a region only if its file is sealed against shrinking
    /// (`F_SEAL_SHRINK`, as DPDK and libmemif seal their memfds): a peer
    /// that truncated an unsealed file under the mapping would make our
    /// accesses fault (SIGBUS). Set this to map unsealed regions anyway
    /// (for example a zero-copy client's hugepage files), accepting that
    /// risk. Default false.
    pub allow_unsealed_regions: bool,
    /// A server maps at most this many bytes of a client's regions in all
    /// (each region is also at most 4 GiB: descriptor offsets are 32-bit).
    /// Default 16 GiB.
    pub max_region_bytes: u64,
    /// A server serves only clients running as its own effective user or
    /// as one of these user ids (the kernel's SO_PEERCRED on the
    /// connection; a client in another user namespace shows as the
    /// overflow id). Others are told "Permission denied" and counted in
    /// `handshake_errors`. Default: none beyond our own.
    pub peer_uids: Vec<u32>,
}

impl Config {
    /// A configuration with the defaults listed on each field.
    pub fn new(socket: SocketName, role: Role) -> Config {
        Config {
            socket,
            role,
            id: 0,
            rings: 1,
            log2_ring_size: 10,
            buffer_size: 2048,
            secret: None,
            name: String::from("memif-rs"),
            max_frame: 9216,
            allow_unsealed_regions: false,
            max_region_bytes: 16 << 30,
            peer_uids: Vec::new(),
        }
    }

    /// Bytes the client's region needs for `rings` per direction of
    /// `2^log2` descriptors: the rings, then the buffers.
    pub(crate) fn region_layout(rings: u16, log2: u8, buffer_size: u32) -> (u64, u64) {
        let n_rings = 2 * u64::from(rings);
        let rings_bytes = n_rings * crate::ring::ring_bytes(log2);
        let buffers = n_rings * (1u64 << log2) * u64::from(buffer_size);
        (rings_bytes, rings_bytes + buffers)
    }

    pub(crate) fn validate(&self) -> Result<(), MemifError> {
        let bad = |m: String| Err(MemifError::Config(m));
        if self.rings == 0 || self.rings > MAX_RINGS {
            return bad(format!("rings must be 1..={MAX_RINGS}, not {}", self.rings));
        }
        if self.log2_ring_size > MAX_LOG2_RING_SIZE {
            return bad(format!(
                "log2_ring_size must be at most {MAX_LOG2_RING_SIZE}, not {}",
                self.log2_ring_size
            ));
        }
        if self.buffer_size < 64 {
            return bad(format!(
                "buffer_size must be at least 64, not {}",
                self.buffer_size
            ));
        }
        if self.max_frame == 0 {
            return bad("max_frame must not be 0".into());
        }
        if let Some(s) = &self.secret {
            // The field is 24 bytes and C peers expect a NUL in it.
            if s.len() > 23 {
                return bad("secret is longer than 23 bytes".into());
            }
        }
        if self.role == Role::Client {
            let (_, total) =
                Config::region_layout(self.rings, self.log2_ring_size, self.buffer_size);
            // Descriptor offsets are u32: every buffer must start and end
            // below 4 GiB.
            if total > u64::from(u32::MAX) {
                return bad(format!(
                    "rings x ring size x buffer_size needs a {total}-byte region; \
                     descriptor offsets reach only 4 GiB"
                ));
            }
        }
        crate::sock::sockaddr(&self.socket).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_names_are_abstract() {
        assert_eq!(
            SocketName::parse("@memif"),
            SocketName::Abstract("memif".into())
        );
        assert_eq!(
            SocketName::parse("/run/memif.sock"),
            SocketName::Path("/run/memif.sock".into())
        );
        assert_eq!(SocketName::parse("@x").to_string(), "@x");
    }

    #[test]
    fn bad_sizes_are_refused() {
        let ok = Config::new(SocketName::parse("@t"), Role::Client);
        ok.validate().unwrap();
        let mut c = ok.clone();
        c.rings = 0;
        assert!(c.validate().is_err());
        let mut c = ok.clone();
        c.log2_ring_size = 15;
        assert!(c.validate().is_err());
        let mut c = ok.clone();
        c.rings = 64;
        c.log2_ring_size = 14;
        c.buffer_size = 4096;
        assert!(c.validate().is_err(), "region beyond 4 GiB");
        let mut c = ok.clone();
        c.secret = Some("x".repeat(24));
        assert!(c.validate().is_err());
        let mut c = ok;
        c.socket = SocketName::Path("/".repeat(200).into());
        assert!(c.validate().is_err());
    }
}
