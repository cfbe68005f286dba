//! An accumulator of PCIe traffic that a NIC model updates on every DMA and
//! register access.

use std::ops::AddAssign;

use serde::{Deserialize, Serialize};

use crate::link::LinkConfig;

/// Direction of a transfer on the link, named from the device's side of
/// the paper's figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Device to host: DMA writes and read requests.
    Up,
    /// Host to device: read completions and CPU register writes.
    Down,
}

/// What a transfer carries. Everything except [`TrafficClass::Data`] is
/// metadata: bytes spent telling the two sides where the data is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrafficClass {
    /// Packet bytes (frames, or a pipe's byte stream).
    Data,
    /// Ensō notifications: RX notifications, TX notifications and their
    /// completions.
    Notification,
    /// Descriptor-ring traffic: descriptor fetches and write-backs.
    Descriptor,
    /// CPU register writes: doorbells, head and tail updates.
    Register,
}

impl TrafficClass {
    /// All classes, in the order they are stored and reported.
    pub const ALL: [TrafficClass; 4] = [
        TrafficClass::Data,
        TrafficClass::Notification,
        TrafficClass::Descriptor,
        TrafficClass::Register,
    ];

    /// True for every class but [`TrafficClass::Data`].
    pub const fn is_metadata(self) -> bool {
        !matches!(self, TrafficClass::Data)
    }
}

/// Counts for one class in one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassCounters {
    /// Bytes on the link: payload, TLP headers, data-link framing.
    pub link_bytes: u64,
    /// Payload bytes only (what a memory-side counter would see).
    pub payload_bytes: u64,
    /// TLPs sent.
    pub tlps: u64,
    /// Recorded operations that sent at least one TLP this way (one DMA
    /// write, one read's requests, one read's completions, one register
    /// write).
    pub transactions: u64,
}

impl ClassCounters {
    /// Link bytes that are not payload: headers and framing.
    pub const fn header_bytes(&self) -> u64 {
        self.link_bytes - self.payload_bytes
    }

    #[inline]
    fn record(&mut self, link_bytes: u64, payload_bytes: u64, tlps: u64) {
        self.record_many(1, link_bytes, payload_bytes, tlps);
    }

    /// `transactions` operations carrying these totals between them.
    #[inline]
    fn record_many(&mut self, transactions: u64, link_bytes: u64, payload_bytes: u64, tlps: u64) {
        self.link_bytes += link_bytes;
        self.payload_bytes += payload_bytes;
        self.tlps += tlps;
        self.transactions += transactions;
    }
}

impl AddAssign<&ClassCounters> for ClassCounters {
    fn add_assign(&mut self, other: &ClassCounters) {
        self.link_bytes += other.link_bytes;
        self.payload_bytes += other.payload_bytes;
        self.tlps += other.tlps;
        self.transactions += other.transactions;
    }
}

/// Counts for every class in one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectionCounters {
    /// Packet data.
    pub data: ClassCounters,
    /// Ensō notifications.
    pub notification: ClassCounters,
    /// Descriptor fetches and write-backs.
    pub descriptor: ClassCounters,
    /// Register writes.
    pub register: ClassCounters,
}

impl DirectionCounters {
    /// The counters of one class.
    #[inline]
    pub const fn class(&self, class: TrafficClass) -> &ClassCounters {
        match class {
            TrafficClass::Data => &self.data,
            TrafficClass::Notification => &self.notification,
            TrafficClass::Descriptor => &self.descriptor,
            TrafficClass::Register => &self.register,
        }
    }

    #[inline]
    fn class_mut(&mut self, class: TrafficClass) -> &mut ClassCounters {
        match class {
            TrafficClass::Data => &mut self.data,
            TrafficClass::Notification => &mut self.notification,
            TrafficClass::Descriptor => &mut self.descriptor,
            TrafficClass::Register => &mut self.register,
        }
    }

    /// Sum over all classes.
    pub fn total(&self) -> ClassCounters {
        let mut sum = ClassCounters::default();
        for class in TrafficClass::ALL {
            sum += self.class(class);
        }
        sum
    }

    /// Link bytes of the metadata classes (all but data).
    pub fn metadata_bytes(&self) -> u64 {
        self.notification.link_bytes + self.descriptor.link_bytes + self.register.link_bytes
    }

    /// Link bytes that are not packet data: metadata plus the headers of
    /// data TLPs.
    pub fn overhead_bytes(&self) -> u64 {
        self.total().link_bytes - self.data.payload_bytes
    }

    /// Share of this direction's link bytes spent on metadata; 0 when idle.
    pub fn metadata_fraction(&self) -> f64 {
        ratio(self.metadata_bytes(), self.total().link_bytes)
    }
}

impl AddAssign<&DirectionCounters> for DirectionCounters {
    fn add_assign(&mut self, other: &DirectionCounters) {
        for class in TrafficClass::ALL {
            *self.class_mut(class) += other.class(class);
        }
    }
}

fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

/// Running totals of the PCIe traffic of one NIC (or one part of it).
///
/// It holds the [`LinkConfig`] because how a transfer is cut into TLPs
/// depends on MPS, MRRS and RCB; the engine creates it once with its link
/// and then passes only (class, address, length) per transfer. Recording
/// is a few integer divisions and additions: no allocation, no atomics.
/// Give each thread its own and [`add`](PcieCounters::add) them for a
/// report.
///
/// ```
/// use pcie_model::{LinkConfig, PcieCounters, TrafficClass};
///
/// let mut c = PcieCounters::new(LinkConfig::default());
/// c.record_dma_write(TrafficClass::Data, 0x1000, 64); // a frame, up
/// c.record_dma_write(TrafficClass::Notification, 0x8000, 64);
/// c.record_mmio_write(TrafficClass::Register, 4); // head update, down
/// assert_eq!(c.up.total().link_bytes, 88 + 88);
/// assert_eq!(c.down.total().link_bytes, 28);
/// assert_eq!(c.metadata_bytes(), 88 + 28);
/// ```
///
/// Deliberately not `Copy`: a snapshot for a report should be an explicit
/// `clone()`, not an accidental copy of a few hundred bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcieCounters {
    /// The link the transfers are cut for.
    pub link: LinkConfig,
    /// Device-to-host traffic.
    pub up: DirectionCounters,
    /// Host-to-device traffic.
    pub down: DirectionCounters,
}

impl PcieCounters {
    /// Empty counters for `link`.
    pub const fn new(link: LinkConfig) -> PcieCounters {
        const ZERO: ClassCounters = ClassCounters {
            link_bytes: 0,
            payload_bytes: 0,
            tlps: 0,
            transactions: 0,
        };
        const EMPTY: DirectionCounters = DirectionCounters {
            data: ZERO,
            notification: ZERO,
            descriptor: ZERO,
            register: ZERO,
        };
        PcieCounters {
            link,
            up: EMPTY,
            down: EMPTY,
        }
    }

    /// The counters of one direction.
    pub const fn direction(&self, dir: Direction) -> &DirectionCounters {
        match dir {
            Direction::Up => &self.up,
            Direction::Down => &self.down,
        }
    }

    /// The device writes `len` bytes to host memory at `addr`. Counted up.
    /// Zero-length writes are not issued and not counted.
    #[inline]
    pub fn record_dma_write(&mut self, class: TrafficClass, addr: u64, len: u64) {
        if len == 0 {
            return;
        }
        let tlps = self.link.dma_write_tlps(addr, len);
        let bytes = len + tlps * u64::from(crate::tlp::MEM_REQUEST_OVERHEAD);
        self.up.class_mut(class).record(bytes, len, tlps);
    }

    /// `writes` DMA writes already cut into `tlps` TLPs (see
    /// [`LinkConfig::dma_write_tlps`]) carrying `len` bytes in all: the sum
    /// of as many [`PcieCounters::record_dma_write`] calls, for a caller
    /// that accounts a run of writes at once.
    #[inline]
    pub fn record_dma_writes(&mut self, class: TrafficClass, writes: u64, len: u64, tlps: u64) {
        let bytes = len + tlps * u64::from(crate::tlp::MEM_REQUEST_OVERHEAD);
        self.up
            .class_mut(class)
            .record_many(writes, bytes, len, tlps);
    }

    /// The device reads `len` bytes of host memory at `addr`: the requests
    /// are counted up (no payload), the completions down (`len` payload).
    /// Zero-length reads are not issued and not counted.
    #[inline]
    pub fn record_dma_read(&mut self, class: TrafficClass, addr: u64, len: u64) {
        if len == 0 {
            return;
        }
        let requests = self.link.dma_read_request_tlps(addr, len);
        let request_bytes = requests * u64::from(crate::tlp::MEM_REQUEST_OVERHEAD);
        self.up.class_mut(class).record(request_bytes, 0, requests);
        let completions = self.link.dma_read_completion_tlps(addr, len);
        let completion_bytes = len + completions * u64::from(crate::tlp::COMPLETION_OVERHEAD);
        self.down
            .class_mut(class)
            .record(completion_bytes, len, completions);
    }

    /// `reads` DMA reads already cut into `requests` read requests and
    /// `completions` completions (see [`LinkConfig::dma_read_request_tlps`]
    /// and [`LinkConfig::dma_read_completion_tlps`]) carrying `len` bytes
    /// in all: the sum of as many [`PcieCounters::record_dma_read`] calls,
    /// for a caller that accounts a batch of reads at once.
    #[inline]
    pub fn record_dma_reads(
        &mut self,
        class: TrafficClass,
        reads: u64,
        len: u64,
        requests: u64,
        completions: u64,
    ) {
        let request_bytes = requests * u64::from(crate::tlp::MEM_REQUEST_OVERHEAD);
        self.up
            .class_mut(class)
            .record_many(reads, request_bytes, 0, requests);
        let completion_bytes = len + completions * u64::from(crate::tlp::COMPLETION_OVERHEAD);
        self.down
            .class_mut(class)
            .record_many(reads, completion_bytes, len, completions);
    }

    /// The CPU writes `len` bytes to a device register (4 for a doorbell).
    /// Counted down.
    #[inline]
    pub fn record_mmio_write(&mut self, class: TrafficClass, len: u64) {
        let tlps = self.link.mmio_write_tlps(len);
        let bytes = len + tlps * u64::from(crate::tlp::MEM_REQUEST_OVERHEAD);
        self.down.class_mut(class).record(bytes, len, tlps);
    }

    /// Adds another accumulator's counts to this one (e.g. one per queue
    /// or per thread). Both should describe the same link; in debug builds
    /// a mismatch panics.
    pub fn add(&mut self, other: &PcieCounters) {
        debug_assert_eq!(self.link, other.link, "merging counters of different links");
        self.up += &other.up;
        self.down += &other.down;
    }

    /// Forgets all counts, keeping the link.
    pub fn reset(&mut self) {
        *self = PcieCounters::new(self.link);
    }

    /// Both directions together.
    pub fn total(&self) -> ClassCounters {
        let mut sum = self.up.total();
        sum += &self.down.total();
        sum
    }

    /// Link bytes of metadata classes, both directions.
    pub fn metadata_bytes(&self) -> u64 {
        self.up.metadata_bytes() + self.down.metadata_bytes()
    }

    /// Share of all link bytes (both directions) spent on metadata.
    pub fn metadata_fraction(&self) -> f64 {
        ratio(self.metadata_bytes(), self.total().link_bytes)
    }

    /// Link bytes that are not packet data, both directions.
    pub fn overhead_bytes(&self) -> u64 {
        self.up.overhead_bytes() + self.down.overhead_bytes()
    }

    /// Average (up, down) link bytes per packet over `packets` packets,
    /// comparable with the closed-form model's
    /// [`BytesPerPacket`](crate::BytesPerPacket).
    pub fn per_packet(&self, packets: u64) -> crate::BytesPerPacket {
        let n = packets.max(1) as f64;
        crate::BytesPerPacket {
            up: self.up.total().link_bytes as f64 / n,
            down: self.down.total().link_bytes as f64 / n,
        }
    }

    /// Link utilisation (up, down) as a fraction of the TLP bandwidth if
    /// the recorded traffic took `seconds` of wall-clock time. Above 1.0
    /// the real link could not have carried it.
    pub fn utilisation(&self, seconds: f64) -> (f64, f64) {
        let capacity = self.link.tlp_bytes_per_sec() * seconds;
        (
            self.up.total().link_bytes as f64 / capacity,
            self.down.total().link_bytes as f64 / capacity,
        )
    }
}

impl AddAssign<&PcieCounters> for PcieCounters {
    fn add_assign(&mut self, other: &PcieCounters) {
        self.add(other);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_counts_up_only() {
        let mut c = PcieCounters::default();
        c.record_dma_write(TrafficClass::Data, 0, 1514);
        let d = c.up.data;
        assert_eq!(d.tlps, 6);
        assert_eq!(d.link_bytes, 1514 + 6 * 24);
        assert_eq!(d.payload_bytes, 1514);
        assert_eq!(d.transactions, 1);
        assert_eq!(c.down.total(), ClassCounters::default());
    }

    #[test]
    fn read_counts_requests_up_and_completions_down() {
        let mut c = PcieCounters::default();
        c.record_dma_read(TrafficClass::Descriptor, 0x40, 128);
        assert_eq!(c.up.descriptor.link_bytes, 24);
        assert_eq!(c.up.descriptor.payload_bytes, 0);
        assert_eq!(c.up.descriptor.tlps, 1);
        assert_eq!(c.down.descriptor.link_bytes, 128 + 2 * 20);
        assert_eq!(c.down.descriptor.payload_bytes, 128);
        assert_eq!(c.down.descriptor.tlps, 2);
        assert_eq!(c.metadata_bytes(), 24 + 168);
        assert!((c.metadata_fraction() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_batch_of_reads_counts_what_the_reads_one_by_one_count() {
        let link = LinkConfig::default();
        let reads = [(0x40u64, 128u64), (1000, 1514), (4090, 64), (512, 60)];
        let mut one = PcieCounters::default();
        let (mut len, mut req, mut cpl) = (0, 0, 0);
        for &(addr, n) in &reads {
            one.record_dma_read(TrafficClass::Data, addr, n);
            len += n;
            req += link.dma_read_request_tlps(addr, n);
            cpl += link.dma_read_completion_tlps(addr, n);
        }
        let mut batch = PcieCounters::default();
        batch.record_dma_reads(TrafficClass::Data, reads.len() as u64, len, req, cpl);
        assert_eq!(batch, one);
        // Requests up, completions down, one transaction each way per read.
        assert_eq!(batch.up.data.transactions, 4);
        assert_eq!(batch.down.data.payload_bytes, 128 + 1514 + 64 + 60);
    }

    #[test]
    fn zero_length_dma_is_free() {
        let mut c = PcieCounters::default();
        c.record_dma_write(TrafficClass::Data, 0, 0);
        c.record_dma_read(TrafficClass::Data, 0, 0);
        assert_eq!(c, PcieCounters::default());
        assert_eq!(c.metadata_fraction(), 0.0);
    }

    #[test]
    fn metadata_excludes_data_but_overhead_includes_its_headers() {
        let mut c = PcieCounters::default();
        c.record_dma_write(TrafficClass::Data, 0, 64);
        c.record_dma_write(TrafficClass::Notification, 0, 64);
        c.record_mmio_write(TrafficClass::Register, 4);
        assert_eq!(c.metadata_bytes(), 88 + 28);
        assert_eq!(c.overhead_bytes(), 24 + 88 + 28);
        assert_eq!(c.total().link_bytes, 88 + 88 + 28);
        assert!((c.up.metadata_fraction() - 0.5).abs() < 1e-12);
        assert!((c.down.metadata_fraction() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn merging_equals_recording_in_one() {
        let mut a = PcieCounters::default();
        let mut b = PcieCounters::default();
        let mut both = PcieCounters::default();
        for (i, c) in [&mut a, &mut b].into_iter().enumerate() {
            c.record_dma_write(TrafficClass::Data, 64 * i as u64, 100);
            c.record_dma_read(TrafficClass::Descriptor, 0, 64);
            c.record_mmio_write(TrafficClass::Register, 4);
        }
        for i in 0..2u64 {
            both.record_dma_write(TrafficClass::Data, 64 * i, 100);
            both.record_dma_read(TrafficClass::Descriptor, 0, 64);
            both.record_mmio_write(TrafficClass::Register, 4);
        }
        a += &b;
        assert_eq!(a, both);
        a.reset();
        assert_eq!(a, PcieCounters::default());
    }

    #[test]
    fn per_packet_and_utilisation() {
        let mut c = PcieCounters::default();
        for i in 0..10 {
            c.record_dma_write(TrafficClass::Data, i * 64, 64);
        }
        let pp = c.per_packet(10);
        assert_eq!(pp.up, 88.0);
        assert_eq!(pp.down, 0.0);
        // 880 B in the time the link carries exactly 880 B: fully used.
        let secs = 880.0 / c.link.tlp_bytes_per_sec();
        let (up, down) = c.utilisation(secs);
        assert!((up - 1.0).abs() < 1e-9);
        assert_eq!(down, 0.0);
    }
}
