//! `afpacket:IFACE`: a port on an existing Linux interface (a veth end, a
//! physical NIC), through AF_PACKET's memory-mapped rings: a block-based
//! RX ring (TPACKET_V3) and a TX ring with the qdisc bypassed
//! (TPACKET_V2). Both are polled by the engine without system calls; a
//! step's transmissions leave with one `sendto`. The port has its own MAC
//! (see `enso_abi::devname::port_mac`), so the socket receives in
//! promiscuous mode (a membership of the socket's own, which ends with it:
//! the interface's flags are never changed). VLAN tags the kernel strips
//! are put back; frames above the port's largest (1536 B) are counted as
//! oversize; the kernel's own drops are read every millisecond and counted.
//! Nothing is opened but the interface named.

use serde::{Deserialize, Serialize};

use super::staging::Staging;
use super::{Backend, BackendError, MAINTAIN_EVERY_NS};
use crate::wire::MAX_FRAME;

/// A port wired to an existing interface.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AfPacketWire {
    /// The interface's name.
    pub iface: String,
}

/// A port wired to an existing interface.
#[derive(Debug)]
pub struct AfPacketPort {
    sock: rawsock::AfPacket,
    staged: Staging,
    counters: rawsock::Counters,
    tx_ring_full: u64,
    last_maintain: u64,
}

impl AfPacketPort {
    /// Opens both rings on `iface`.
    pub fn open(w: &AfPacketWire) -> Result<Self, BackendError> {
        let mut cfg = rawsock::AfPacketConfig::new(&w.iface);
        cfg.max_frame = MAX_FRAME;
        cfg.promiscuous = true;
        let mut sock = rawsock::AfPacket::open(&cfg)
            .map_err(|e| BackendError::Open(format!("afpacket:{}: {e}", w.iface)))?;
        let counters = sock.counters();
        Ok(Self {
            sock,
            staged: Staging::default(),
            counters,
            tx_ring_full: 0,
            last_maintain: 0,
        })
    }

    fn send_staged(&mut self) {
        let sock = &mut self.sock;
        let (_, left) = self.staged.drain(|it| sock.tx_burst(it));
        self.tx_ring_full += left as u64;
    }
}

impl Backend for AfPacketPort {
    fn describe(&self) -> String {
        format!("afpacket:{}", self.sock.iface())
    }

    fn receive(&mut self, _now: u64, budget: usize, deliver: &mut dyn FnMut(&[u8])) -> usize {
        self.sock.rx_burst(budget, |f| deliver(f))
    }

    fn transmit(&mut self, frame: &[u8], _now: u64) {
        if !self.staged.push(frame) {
            self.send_staged();
            if !self.staged.push(frame) {
                self.tx_ring_full += 1;
            }
        }
    }

    fn flush(&mut self, _now: u64) {
        if !self.staged.is_empty() {
            self.send_staged();
        }
    }

    fn maintain(&mut self, now: u64) {
        if now.saturating_sub(self.last_maintain) >= MAINTAIN_EVERY_NS {
            self.last_maintain = now;
            self.counters = self.sock.counters();
        }
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        vec![
            ("rx_frames", c.rx_frames),
            ("tx_frames", c.tx_frames),
            ("vlan_restored", c.vlan_restored),
            ("csum_not_ready", c.csum_not_ready),
            ("tx_would_block", c.tx_would_block),
        ]
    }

    fn drops(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        vec![
            ("kernel_drops", c.kernel_drops),
            ("oversize", c.oversize),
            ("rx_malformed", c.rx_malformed),
            ("tx_ring_full", self.tx_ring_full),
            ("tx_oversize", c.tx_oversize),
            ("tx_runt", c.tx_runt),
            ("tx_errors", c.tx_errors),
        ]
    }

    fn finish(&mut self) {
        self.flush(0);
        self.counters = self.sock.counters();
    }
}
