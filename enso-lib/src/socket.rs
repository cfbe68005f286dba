//! Ensō's socket-like API, for porting socket programs.
//!
//! Ensō's library offers calls named after BSD sockets (`socket`, `bind`,
//! `recv`, `recv_zc`, `recv_select`, `send`, `get_completions`,
//! `free_enso_pipe`, `enable_device_timestamp`, ...) over its pipes. This
//! module has the same calls with the same meaning, as methods of one
//! [`Sockets`] value that owns the device handle (Ensō keeps that state in
//! globals):
//!
//! | Ensō (C++) | here |
//! |---|---|
//! | `socket(AF_INET, SOCK_DGRAM, 0, fallback)` | [`Sockets::socket`]`(fallback)` |
//! | `bind(fd, addr, len, nb_src)` | [`Sockets::bind`]`(s, addr)` |
//! | `recv(fd, buf, len, flags)` | [`Sockets::recv`]`(s, buf)` |
//! | `recv_zc(fd, &buf, len, flags)` | [`Sockets::recv_zc`]`(s)` |
//! | `recv_select(ref, &fd, &buf, len, flags)` | [`Sockets::recv_select`]`()` |
//! | `free_enso_pipe(fd, len)` | [`Sockets::free`]`(s, len)` |
//! | `send(fd, phys_addr, len, flags)` (bytes in the socket's pipe) | [`Sockets::send_zc`]`(s, len)` |
//! | `send` of bytes elsewhere | [`Sockets::send`]`(s, frames)` (copies) |
//! | `get_completions(ref)` | [`Sockets::get_completions`]`()` |
//! | `enable_device_timestamp(fd, offset)` / `disable_...` | [`Sockets::enable_device_timestamp`] / [`Sockets::disable_device_timestamp`] |
//! | `enable_device_rate_limit(fd, num, den)` / `disable_...` | [`Sockets::enable_device_rate_limit`] / [`Sockets::disable_device_rate_limit`] |
//! | `enable_device_round_robin(fd)` / `disable_...` | [`Sockets::enable_device_round_robin`] / [`Sockets::disable_device_round_robin`] |
//! | `shutdown(fd, how)` | [`Sockets::shutdown`]`(s)` |
//!
//! As in Ensō, a socket is an RX/TX pipe and what it receives is raw
//! frames (Ethernet header first), each starting on a 64-byte boundary;
//! what it sends is frames laid out the same way. `bind` steers UDP
//! datagrams for one local address and port to the socket; a socket made
//! with `fallback` also receives what no rule matches.
//!
//! ```no_run
//! use std::net::SocketAddrV4;
//! use enso::socket::Sockets;
//!
//! let mut socks = Sockets::open("enso0")?;
//! let s = socks.socket(false)?;
//! socks.bind(s, "10.0.0.1:7".parse::<SocketAddrV4>().unwrap())?;
//! loop {
//!     // Zero copy: the bytes stay in the pipe until sent or freed.
//!     let n = {
//!         let mut frames = socks.recv_zc(s)?;
//!         for f in frames.packets_mut() {
//!             // ... turn each request into its answer, in place ...
//!             let _ = f;
//!         }
//!         frames.len()
//!     };
//!     if n > 0 {
//!         socks.send_zc(s, n)?; // freed when the NIC has sent them
//!     }
//! }
//! # Ok::<(), enso::socket::SocketError>(())
//! ```

use std::net::SocketAddrV4;
use std::path::Path;

use enso_abi::wire::PROTO_UDP;

use crate::batch::RxBatch;
use crate::device::{Device, DeviceOptions, FlowRule, RxTxPipe, TxPipe};
use crate::error::{Error, SendError};
use crate::TsFormat;

/// A socket: an index into its [`Sockets`], as Ensō's are small integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Socket(pub u32);

/// What a socket call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// The socket was never made, or was shut down.
    #[error("no socket {0}")]
    NoSocket(u32),
    /// The frames given to [`Sockets::send`] are not frames on 64-byte
    /// boundaries (as a TX pipe holds them).
    #[error("bytes to send are not frames on 64-byte boundaries: {0}")]
    NotFrames(String),
    /// The library's own error.
    #[error(transparent)]
    Enso(#[from] Error),
}

fn e<E: Into<Error>>(x: E) -> SocketError {
    SocketError::Enso(x.into())
}

#[derive(Debug)]
struct Slot {
    pipe: RxTxPipe,
    rules: Vec<FlowRule>,
}

/// The sockets of one device handle: Ensō's socket calls as methods.
#[derive(Debug)]
pub struct Sockets {
    dev: Device,
    socks: Vec<Option<Slot>>,
    /// For [`Sockets::send`] of bytes that are not in a socket's pipe.
    tx: Option<TxPipe>,
    /// The handle's completion count when `get_completions` last returned.
    completions_told: u64,
}

impl Sockets {
    /// Attaches to device `name` under `/dev/shm` with one TX pipe (for
    /// [`Sockets::send`]) and no pipes of its own yet.
    pub fn open(name: &str) -> Result<Sockets, SocketError> {
        Sockets::open_in(Path::new("/dev/shm"), name)
    }

    /// As [`Sockets::open`], for a device directory under `dir`.
    pub fn open_in(dir: &Path, name: &str) -> Result<Sockets, SocketError> {
        let dev = Device::open_in(dir, name, Self::options()).map_err(e)?;
        Ok(Sockets::from_device(dev))
    }

    /// The options [`Sockets::open`] attaches with: 64 pipe ids reserved
    /// (a socket past them asks the device for more, up to its pipe ids)
    /// and one TX pipe.
    pub fn options() -> DeviceOptions {
        DeviceOptions {
            pipes: 64,
            tx_pipes: 1,
            ..Default::default()
        }
    }

    /// Sockets over a device handle attached some other way (in process,
    /// say). Sockets past the pipes it reserved ask the device for more,
    /// as [`Device::alloc_rx_pipe`] does.
    pub fn from_device(dev: Device) -> Sockets {
        let told = dev.sends_completed();
        Sockets {
            dev,
            socks: Vec::new(),
            tx: None,
            completions_told: told,
        }
    }

    /// The device handle, for calls this API has no name for.
    pub fn device(&mut self) -> &mut Device {
        &mut self.dev
    }

    fn slot(&self, s: Socket) -> Result<&Slot, SocketError> {
        self.socks
            .get(s.0 as usize)
            .and_then(Option::as_ref)
            .ok_or(SocketError::NoSocket(s.0))
    }

    fn pipe(&self, s: Socket) -> Result<RxTxPipe, SocketError> {
        self.slot(s).map(|x| x.pipe)
    }

    /// `socket()`: a new socket, an RX/TX pipe of its own. With
    /// `fallback`, it also receives frames that no rule steers elsewhere
    /// (spread over all fallback sockets by the NIC's hash, or in turn with
    /// [`Sockets::enable_device_round_robin`]).
    pub fn socket(&mut self, fallback: bool) -> Result<Socket, SocketError> {
        let pipe = self.dev.alloc_rxtx_pipe(fallback).map_err(e)?;
        let slot = Some(Slot {
            pipe,
            rules: Vec::new(),
        });
        // The lowest free number, as file descriptors are given.
        match self.socks.iter().position(Option::is_none) {
            Some(i) => {
                self.socks[i] = slot;
                Ok(Socket(i as u32))
            }
            None => {
                self.socks.push(slot);
                Ok(Socket(self.socks.len() as u32 - 1))
            }
        }
    }

    /// `bind()`: UDP datagrams to `local` (address and port) go to socket
    /// `s`. Address 0 or port 0 match any (the NIC's wildcards). A socket
    /// may be bound several times; each binding is one flow rule.
    pub fn bind(&mut self, s: Socket, local: SocketAddrV4) -> Result<(), SocketError> {
        let pipe = self.pipe(s)?;
        let rule = FlowRule {
            dst_ip: u32::from(*local.ip()),
            dst_port: local.port(),
            protocol: PROTO_UDP,
            ..Default::default()
        };
        self.dev.bind(pipe, rule).map_err(e)?;
        if let Some(Some(slot)) = self.socks.get_mut(s.0 as usize) {
            slot.rules.push(rule);
        }
        Ok(())
    }

    /// `recv_zc()`: the frames socket `s` has received and not yet taken,
    /// in place (zero copy). They stay in the pipe until
    /// [`Sockets::free`] or [`Sockets::send_zc`] hands them back; an empty
    /// batch if nothing came.
    pub fn recv_zc(&mut self, s: Socket) -> Result<RxBatch<'_>, SocketError> {
        let pipe = self.pipe(s)?;
        self.dev.recv(pipe).map_err(e)
    }

    /// `recv()`: copies whole frames received on `s` into `buf`, each on a
    /// 64-byte boundary as in the pipe, as many as fit, and frees them;
    /// frames that do not fit stay for the next call. Returns the bytes
    /// written (0: nothing came, or the first frame is longer than `buf`).
    pub fn recv(&mut self, s: Socket, buf: &mut [u8]) -> Result<usize, SocketError> {
        let pipe = self.pipe(s)?;
        let (taken, fit) = {
            let batch = self.dev.recv(pipe).map_err(e)?;
            let bytes = batch.bytes();
            let mut fit = 0;
            for p in batch.packets() {
                // Where this frame's slot ends, from the batch's start.
                let start = p.as_ptr() as usize - bytes.as_ptr() as usize;
                let end = (start + p.len()).next_multiple_of(64).min(bytes.len());
                if end > buf.len() {
                    break;
                }
                fit = end;
            }
            buf[..fit].copy_from_slice(&bytes[..fit]);
            (bytes.len(), fit)
        };
        if taken > fit {
            self.dev.unconsume(pipe, taken - fit).map_err(e)?;
        }
        if fit > 0 {
            self.dev.free(pipe, fit).map_err(e)?;
        }
        Ok(fit)
    }

    /// `recv_select()`: the next socket with frames, and its frames in
    /// place (as [`Sockets::recv_zc`]); `None` if no socket has any.
    pub fn recv_select(&mut self) -> Result<Option<(Socket, RxBatch<'_>)>, SocketError> {
        let Some(pipe) = self.dev.next_rxtx_pipe_with_data().map_err(e)? else {
            return Ok(None);
        };
        let s = self
            .socks
            .iter()
            .position(|x| x.as_ref().is_some_and(|x| x.pipe == pipe))
            .map(|i| Socket(i as u32));
        match s {
            Some(s) => Ok(Some((s, self.dev.recv(pipe).map_err(e)?))),
            // A pipe of this handle that is no socket of ours (made through
            // `device()`): leave it to whoever made it.
            None => Ok(None),
        }
    }

    /// `free_enso_pipe()`: hands back the first `len` bytes taken from
    /// socket `s` (by [`Sockets::recv_zc`] or [`Sockets::recv_select`]).
    pub fn free(&mut self, s: Socket, len: usize) -> Result<(), SocketError> {
        let pipe = self.pipe(s)?;
        self.dev.free(pipe, len).map_err(e)
    }

    /// `send()` of received bytes: sends the first `len` bytes taken from
    /// socket `s` and not yet sent or freed, in place (frames on 64-byte
    /// boundaries, `len` a multiple of 64, as [`RxBatch::len`] is), on port
    /// 0; they are freed once the NIC has sent them.
    pub fn send_zc(&mut self, s: Socket, len: usize) -> Result<(), SocketError> {
        let pipe = self.pipe(s)?;
        self.dev.send_and_free(pipe, len).map_err(e)
    }

    /// `send()` of bytes elsewhere: copies `frames` (frames on 64-byte
    /// boundaries; the last one's padding may be left out) into the
    /// handle's TX pipe and sends them on port 0. Socket `s` must exist
    /// (Ensō sends through the socket's device; so does this).
    pub fn send(&mut self, s: Socket, frames: &[u8]) -> Result<(), SocketError> {
        self.slot(s)?;
        if frames.is_empty() {
            return Ok(());
        }
        // The NIC drops what it cannot delimit; say so here instead.
        let mut at = 0;
        while at < frames.len() {
            match enso_abi::wire::delimit(&frames[at..]) {
                Ok(d) if d.start == 0 && d.len <= frames.len() - at => {
                    at += d.len.next_multiple_of(64);
                }
                Ok(_) => {
                    return Err(SocketError::NotFrames(format!(
                        "frame at byte {at} is cut short"
                    )))
                }
                Err(x) => return Err(SocketError::NotFrames(format!("at byte {at}: {x}"))),
            }
        }
        let tx = match self.tx {
            Some(t) => t,
            None => {
                let t = self.dev.alloc_tx_pipe().map_err(e)?;
                self.tx = Some(t);
                t
            }
        };
        let buf = self.dev.tx_buf(tx, frames.len()).map_err(e)?;
        buf.copy_from_slice(frames);
        self.dev
            .send(tx, frames.len(), 0)
            .map_err(|x: SendError| e(x))
    }

    /// `get_completions()`: sends the NIC has completed since the last call
    /// (what was sent and freed; configuration such as a fallback socket
    /// or timestamping is not counted), as Ensō counts them: every
    /// completion the handle reaped counts, also those reaped by `recv`,
    /// `send` or `recv_select` in between, so a loop that keeps
    /// `pending -= get_completions()` sees every send complete.
    pub fn get_completions(&mut self) -> Result<usize, SocketError> {
        self.dev.reap_completions().map_err(e)?;
        let total = self.dev.sends_completed();
        let n = total - self.completions_told;
        self.completions_told = total;
        Ok(n as usize)
    }

    /// `enable_device_timestamp()`: the NIC stamps frames it sends on port
    /// 0 at `offset` and turns the stamp into the round-trip time when they
    /// come back, in Ensō's format ([`TsFormat::Enso`]: big-endian cycles of
    /// 5 ns), so that code reading it with Ensō's `get_pkt_rtt` reads it
    /// unchanged ([`crate::rtt_ns`] reads it in nanoseconds). Ensō's default
    /// offset is [`crate::DEFAULT_RTT_OFFSET`].
    pub fn enable_device_timestamp(&mut self, offset: u8) -> Result<(), SocketError> {
        self.enable_device_timestamp_as(offset, TsFormat::Enso)
    }

    /// As [`Sockets::enable_device_timestamp`], in `format`.
    pub fn enable_device_timestamp_as(
        &mut self,
        offset: u8,
        format: TsFormat,
    ) -> Result<(), SocketError> {
        self.dev
            .set_timestamping_as(0, Some(offset), format)
            .map_err(e)
    }

    /// `disable_device_timestamp()`.
    pub fn disable_device_timestamp(&mut self) -> Result<(), SocketError> {
        self.dev
            .set_timestamping_as(0, None, TsFormat::Enso)
            .map_err(e)
    }

    /// `enable_device_rate_limit()`: port 0 sends at most `num` flits every
    /// `den` cycles of the NIC's 200 MHz clock.
    pub fn enable_device_rate_limit(&mut self, num: u32, den: u32) -> Result<(), SocketError> {
        self.dev.set_rate_limit(0, Some((num, den))).map_err(e)
    }

    /// `disable_device_rate_limit()`.
    pub fn disable_device_rate_limit(&mut self) -> Result<(), SocketError> {
        self.dev.set_rate_limit(0, None).map_err(e)
    }

    /// `enable_device_round_robin()`: frames for the fallback sockets go to
    /// each in turn rather than by hash. Takes any existing socket, as
    /// Ensō's call takes a socket to reach the device.
    pub fn enable_device_round_robin(&mut self, s: Socket) -> Result<(), SocketError> {
        let pipe = self.pipe(s)?;
        self.dev.set_fallback_round_robin(pipe, true).map_err(e)
    }

    /// `disable_device_round_robin()`.
    pub fn disable_device_round_robin(&mut self, s: Socket) -> Result<(), SocketError> {
        let pipe = self.pipe(s)?;
        self.dev.set_fallback_round_robin(pipe, false).map_err(e)
    }

    /// `shutdown()`: removes the socket's bindings, waits (bounded) for its
    /// sends in flight, drops what it holds and frees its pipe
    /// ([`Device::free_pipe`]): the pipe and the socket's number are
    /// reused by a later [`Sockets::socket`].
    pub fn shutdown(&mut self, s: Socket) -> Result<(), SocketError> {
        let slot = self.socks.get_mut(s.0 as usize).and_then(Option::take);
        let Some(slot) = slot else {
            return Err(SocketError::NoSocket(s.0));
        };
        for rule in slot.rules {
            self.dev.unbind(slot.pipe, rule).map_err(e)?;
        }
        self.dev.free_pipe(slot.pipe).map_err(e)
    }
}
