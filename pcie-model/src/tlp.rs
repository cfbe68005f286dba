//! Link bytes of single transactions: how a DMA or register write is cut
//! into TLPs and what each TLP costs on the wire.
//!
//! Every count includes the data-link layer (2 B sequence number, 4 B LCRC)
//! and the physical-layer framing (2 B), so it can be divided directly by
//! [`LinkConfig::tlp_gbps`].

use crate::link::LinkConfig;

/// Data-link (6 B) plus framing (2 B) bytes around every TLP.
pub const DLL_FRAMING_BYTES: u32 = 8;

/// Link bytes of a memory write or memory read request with a 64-bit
/// address, excluding payload: 4 B common header + 12 B request header
/// + [`DLL_FRAMING_BYTES`].
pub const MEM_REQUEST_OVERHEAD: u32 = 24;

/// Link bytes of a completion with data, excluding payload: 4 B common
/// header + 8 B completion header + [`DLL_FRAMING_BYTES`].
pub const COMPLETION_OVERHEAD: u32 = 20;

/// Payload of a doorbell (one 32-bit register write).
pub const DOORBELL_PAYLOAD: u32 = 4;

/// Link bytes of one doorbell: 4 B payload + 24 B = 28 B.
pub const DOORBELL_BYTES: u32 = DOORBELL_PAYLOAD + MEM_REQUEST_OVERHEAD;

/// Number of pieces `[addr, addr + len)` falls into when cut at every
/// multiple of `boundary` (a power of two, or at least non-zero).
/// Zero-length spans have no pieces.
///
/// With `addr` a multiple of `boundary` this is `ceil(len / boundary)`.
///
/// Always inlined: the emulated NIC counts every DMA transfer, and as an
/// out-of-line call it cost a call and the spills around it per frame.
#[inline(always)]
pub fn split_count(addr: u64, len: u64, boundary: u32) -> u64 {
    if len == 0 {
        return 0;
    }
    let last = addr + (len - 1);
    // Not `is_power_of_two`: that is `count_ones() == 1`, which without
    // the popcnt instruction (the baseline x86-64 target) is a dozen
    // instructions of bit counting on every DMA transfer.
    if boundary != 0 && boundary & (boundary - 1) == 0 {
        // The common case (validated links): shifts, not divisions, since
        // the emulated NIC calls this for every DMA transfer.
        let s = boundary.trailing_zeros();
        (last >> s) - (addr >> s) + 1
    } else {
        let b = u64::from(boundary);
        last / b - addr / b + 1
    }
}

/// [`split_count`] for a boundary of `1 << shift`, with `len > 0`: the
/// pieces of `[addr, addr + len)`. For callers that count many transfers
/// against one boundary and keep its shift.
#[inline(always)]
pub fn split_count_shift(addr: u64, len: u64, shift: u32) -> u64 {
    debug_assert!(len > 0);
    ((addr + (len - 1)) >> shift) - (addr >> shift) + 1
}

impl LinkConfig {
    /// TLPs of a DMA write of `len` bytes at host address `addr`: one per
    /// MPS-aligned block the span touches.
    #[inline]
    pub fn dma_write_tlps(&self, addr: u64, len: u64) -> u64 {
        split_count(addr, len, self.mps)
    }

    /// Device-to-host ("up") link bytes of a DMA write of `len` bytes at
    /// `addr`: the payload plus 24 B per TLP. A zero-length write costs
    /// nothing (it is not issued).
    ///
    /// With `addr` MPS-aligned: `len + ceil(len/MPS) * 24`.
    #[inline]
    pub fn dma_write_bytes(&self, addr: u64, len: u64) -> u64 {
        len + self.dma_write_tlps(addr, len) * u64::from(MEM_REQUEST_OVERHEAD)
    }

    /// Read-request TLPs of a DMA read of `len` bytes at `addr`: one per
    /// MRRS-aligned block the span touches.
    #[inline]
    pub fn dma_read_request_tlps(&self, addr: u64, len: u64) -> u64 {
        split_count(addr, len, self.mrrs)
    }

    /// Up link bytes of the read requests of a DMA read of `len` bytes at
    /// `addr` (requests carry no payload): 24 B per request.
    ///
    /// With `addr` MRRS-aligned: `ceil(len/MRRS) * 24`.
    #[inline]
    pub fn dma_read_request_bytes(&self, addr: u64, len: u64) -> u64 {
        self.dma_read_request_tlps(addr, len) * u64::from(MEM_REQUEST_OVERHEAD)
    }

    /// Completion TLPs of a DMA read of `len` bytes at `addr`: one per
    /// RCB-aligned block the span touches.
    ///
    /// Since MRRS is a multiple of RCB and requests end on MRRS
    /// boundaries, counting RCB blocks over the whole span is exact.
    /// Completers may legally merge adjacent RCB blocks (up to MPS); this
    /// model, like the closed-form one, assumes they do not.
    #[inline]
    pub fn dma_read_completion_tlps(&self, addr: u64, len: u64) -> u64 {
        split_count(addr, len, self.rcb)
    }

    /// Host-to-device ("down") link bytes of the completions of a DMA read
    /// of `len` bytes at `addr`: the data plus 20 B per completion.
    ///
    /// With `addr` RCB-aligned: `len + ceil(len/RCB) * 20`.
    #[inline]
    pub fn dma_read_completion_bytes(&self, addr: u64, len: u64) -> u64 {
        len + self.dma_read_completion_tlps(addr, len) * u64::from(COMPLETION_OVERHEAD)
    }

    /// TLPs of a CPU register write of `len` bytes: one, unless the write
    /// is longer than MPS (a write-combined burst).
    #[inline]
    pub fn mmio_write_tlps(&self, len: u64) -> u64 {
        split_count(0, len.max(1), self.mps)
    }

    /// Down link bytes of a CPU register (MMIO) write of `len` bytes:
    /// `len + 24` for anything up to MPS. A 4 B doorbell costs 28 B.
    #[inline]
    pub fn mmio_write_bytes(&self, len: u64) -> u64 {
        len + self.mmio_write_tlps(len) * u64::from(MEM_REQUEST_OVERHEAD)
    }

    /// Payload bandwidth of back-to-back DMA writes of `len` bytes
    /// (MPS-aligned), in Gb/s: TLP bandwidth x `len / link bytes`.
    /// 64 B writes on Gen3 x16 reach 64/88 x 113.7 = 82.7 Gb/s.
    pub fn write_payload_gbps(&self, len: u64) -> f64 {
        self.tlp_gbps() * len as f64 / self.dma_write_bytes(0, len) as f64
    }

    /// Payload bandwidth of back-to-back DMA reads of `len` bytes
    /// (aligned), limited by the completions on the down direction, in
    /// Gb/s. 64 B reads on Gen3 x16 reach 64/84 x 113.7 = 86.6 Gb/s. (The
    /// requests travel the other direction and cost 24 B per read.)
    pub fn read_payload_gbps(&self, len: u64) -> f64 {
        self.tlp_gbps() * len as f64 / self.dma_read_completion_bytes(0, len) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_count_counts_touched_blocks() {
        assert_eq!(split_count(0, 0, 64), 0);
        assert_eq!(split_count(0, 1, 64), 1);
        assert_eq!(split_count(0, 64, 64), 1);
        assert_eq!(split_count(0, 65, 64), 2);
        assert_eq!(split_count(63, 2, 64), 2);
        assert_eq!(split_count(60, 4, 64), 1);
        assert_eq!(split_count(100, 256, 256), 2);
        assert_eq!(split_count(u64::MAX - 63, 64, 64), 1);
    }

    #[test]
    fn the_shift_form_counts_what_the_boundary_form_counts() {
        for shift in [6u32, 7, 8, 12] {
            for addr in [0u64, 1, 63, 64, 100, 255, 256, 4095, 1 << 20] {
                for len in [1u64, 2, 60, 64, 65, 128, 256, 257, 1518, 4096, 9000] {
                    assert_eq!(
                        split_count_shift(addr, len, shift),
                        split_count(addr, len, 1 << shift),
                        "addr {addr} len {len} boundary {}",
                        1 << shift
                    );
                }
            }
        }
        // A 64 B write crossing a 256 B boundary is two TLPs.
        assert_eq!(split_count_shift(224, 64, 8), 2);
    }

    #[test]
    fn aligned_transfers_reduce_to_closed_form_terms() {
        let link = LinkConfig::default();
        for s in [
            1u64, 4, 60, 64, 65, 128, 256, 257, 512, 1024, 1514, 1518, 4096,
        ] {
            let ceil = |b: u64| s.div_ceil(b);
            let base = 1 << 20; // 1 MiB: aligned to every boundary
            assert_eq!(link.dma_write_bytes(base, s), s + ceil(256) * 24, "S={s}");
            assert_eq!(link.dma_read_request_bytes(base, s), ceil(512) * 24);
            assert_eq!(link.dma_read_completion_bytes(base, s), s + ceil(64) * 20);
        }
    }

    #[test]
    fn unaligned_transfers_pay_for_extra_tlps() {
        let link = LinkConfig::default();
        // 256 B starting 128 B into an MPS block straddles two blocks.
        assert_eq!(link.dma_write_tlps(128, 256), 2);
        assert_eq!(link.dma_write_bytes(128, 256), 256 + 48);
        // 64 B starting mid-line: two completions.
        assert_eq!(link.dma_read_completion_bytes(32, 64), 64 + 40);
        // 512 B from 256: two requests.
        assert_eq!(link.dma_read_request_bytes(256, 512), 48);
    }

    #[test]
    fn doorbell_is_28_bytes() {
        let link = LinkConfig::default();
        assert_eq!(DOORBELL_BYTES, 28);
        assert_eq!(link.mmio_write_bytes(4), 28);
        assert_eq!(link.mmio_write_bytes(8), 32);
        assert_eq!(link.mmio_write_bytes(64), 88);
        assert_eq!(link.mmio_write_tlps(0), 1);
    }

    #[test]
    fn small_transfer_efficiency_matches_pcie_bench() {
        let link = LinkConfig::default();
        let w = link.write_payload_gbps(64);
        let r = link.read_payload_gbps(64);
        assert!((w - 82.7).abs() / 82.7 < 0.01, "{w}");
        assert!((r - 86.6).abs() / 86.6 < 0.01, "{r}");
        assert!((w - 113.7 * 64.0 / 88.0).abs() < 0.05);
        assert!((r - 113.7 * 64.0 / 84.0).abs() < 0.05);
    }
}
