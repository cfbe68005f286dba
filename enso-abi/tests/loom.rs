//! Models of the shared-memory protocol under loom, which runs each model
//! over every interleaving of its two threads (the NIC's and software's) and
//! every value the memory model lets each load see, up to a bound on
//! preemptions:
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test --release -p enso-abi --test loom
//! ```
//!
//! The loads and stores with their orderings are the layout types' own
//! methods, the ones the NIC and the library call; what each side keeps to
//! itself (its copies of heads and tails, the NIC's reactive notification
//! rule) is written out here as the engine and the library do it. Frame
//! bytes and buffers are loom cells, so a read or write of them that the
//! protocol does not order after the other side's fails the model.
//!
//! The last models weaken one Release store to Relaxed and expect loom to
//! find the interleaving that breaks the protocol: the models can fail.
#![cfg(loom)]

use enso_abi::layout::{
    self, desc, reg, reg_addr, ring_free, ring_used, split_reg_addr, Descriptor, MmioQueue,
    RxNotification, TxNotification, TxRequest,
};
use enso_abi::sync::{spin_loop, Ordering};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

/// Runs `f` under loom with at most `preemptions` preemptions per
/// execution (what keeps the larger models' state spaces small), and
/// checks that loom explored more than a few executions of it: a model
/// whose threads never overlap would prove nothing.
fn check(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    b.check({
        let runs = runs.clone();
        move || {
            runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            f()
        }
    });
    let runs = runs.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("{runs} executions explored");
    assert!(runs >= 20, "only {runs} executions explored");
}

/// Runs `f` as `check` does and expects loom to find an execution that
/// breaks one of the model's assertions or races on a cell (not one that
/// merely hits loom's own limits).
fn check_fails(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(preemptions, f)));
    let payload = caught.expect_err("no execution broke the weakened protocol");
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(
        msg.starts_with("Causality violation") || msg.starts_with("assertion"),
        "failed for another reason: {msg}"
    );
    eprintln!("caught: {}", msg.lines().next().unwrap_or(""));
}

/// Plain memory shared by the two sides (pipe flits, packet buffers):
/// loom fails the model on any access not ordered after the other side's
/// last one.
struct Cells(Vec<UnsafeCell<u32>>);

impl Cells {
    fn new(n: usize) -> Self {
        Cells((0..n).map(|_| UnsafeCell::new(0)).collect())
    }

    fn write(&self, i: usize, v: u32) {
        // SAFETY: loom tracks every access to the cell and fails the model
        // before an access that races with the other thread's.
        self.0[i].with_mut(|p| unsafe { *p = v });
    }

    fn read(&self, i: usize) -> u32 {
        // SAFETY: as in `write`.
        self.0[i].with(|p| unsafe { *p })
    }
}

/// Entries of the posted-write queues of the models: small, so that
/// software waits for room and the indices wrap.
const MMIO_N: usize = 4;
type Mmio = MmioQueue<MMIO_N>;

/// Software's side of the posted-write queue, as the library's
/// `mmio_write`: its own producer, and the consumer it last loaded.
#[derive(Default)]
struct Poster {
    prod: u32,
    cons: u32,
}

impl Poster {
    /// Posts a register write, waiting while the queue is full.
    fn write(&mut self, q: &Mmio, addr: u32, value: u32, post: PostFn) {
        while !Mmio::has_room(self.prod, self.cons) {
            self.cons = q.acquire_consumer();
            if Mmio::has_room(self.prod, self.cons) {
                break;
            }
            spin_loop();
        }
        post(q, self.prod, addr, value, 0);
        self.prod = self.prod.wrapping_add(1);
    }
}

/// How software posts one entry (the real step, or a weakened copy).
type PostFn = fn(&Mmio, u32, u32, u32, u64);

/// The NIC's side: copies out what is posted (no emulated latency), at most
/// `max` a time, as the engine's `drain_mmio`.
fn take_writes(q: &Mmio, cons: &mut u32, max: usize) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let n = q
        .take(cons, max, 0, 0, &mut out)
        .expect("software never overruns");
    assert_eq!(n, out.len());
    out
}

// ---------------------------------------------------------------------
// Posted register writes (SYNC POINTS A and B).

const WRITES: u32 = 6;

fn posted_writes_model(post: PostFn) {
    let q = Arc::new(Mmio::default());
    let sw = {
        let q = q.clone();
        thread::spawn(move || {
            let mut p = Poster::default();
            for k in 0..WRITES {
                p.write(&q, reg_addr(k, reg::RX_HEAD), 100 + k, post);
            }
        })
    };
    let mut cons = 0;
    let mut got = Vec::new();
    while got.len() < WRITES as usize {
        let batch = take_writes(&q, &mut cons, 3);
        if batch.is_empty() {
            spin_loop();
        }
        got.extend(batch);
    }
    sw.join().unwrap();
    // Every write once, in order, with the value posted: none lost to a
    // reused slot, none read before it was written.
    let want: Vec<_> = (0..WRITES)
        .map(|k| (reg_addr(k, reg::RX_HEAD), 100 + k))
        .collect();
    assert_eq!(got, want);
    assert_eq!(cons, WRITES);
    assert_eq!(q.acquire_consumer(), WRITES);
}

#[test]
fn posted_writes_arrive_once_in_order_through_a_wrapping_queue() {
    check(2, || posted_writes_model(Mmio::post));
}

#[test]
fn an_overrunning_producer_empties_the_queue_and_later_writes_apply() {
    check(3, || {
        let q = Arc::new(Mmio::default());
        let sw = {
            let q = q.clone();
            thread::spawn(move || {
                // Hostile: a producer claiming more entries than the queue
                // holds, then two writes posted after it.
                q.producer.0.store(MMIO_N as u32 + 3, Ordering::Release);
                let mut p = Poster {
                    prod: MMIO_N as u32 + 3,
                    cons: MMIO_N as u32 + 3,
                };
                p.write(&q, reg_addr(1, reg::RX_HEAD), 7, Mmio::post);
                p.write(&q, reg_addr(2, reg::RX_HEAD), 8, Mmio::post);
            })
        };
        let end = MMIO_N as u32 + 5;
        let (mut cons, mut overruns, mut got) = (0u32, 0, Vec::new());
        while cons != end {
            let mut out = Vec::new();
            match q.take(&mut cons, 8, 0, 0, &mut out) {
                None => overruns += 1,
                Some(0) => spin_loop(),
                Some(_) => got.extend(out),
            }
        }
        sw.join().unwrap();
        // Whatever producer the NIC first sees is too far ahead: it counts
        // the overrun once and applies none of the claimed entries. The
        // writes posted after the overrun that it had not seen yet then
        // (none, one or both) are applied, in order.
        assert_eq!(overruns, 1);
        let posted = [
            (reg_addr(1, reg::RX_HEAD), 7),
            (reg_addr(2, reg::RX_HEAD), 8),
        ];
        assert!(posted.ends_with(&got), "applied {got:?}");
        assert_eq!(q.acquire_consumer(), end);
    });
}

// ---------------------------------------------------------------------
// RX: pipe data, RX notifications and the reactive rule (SYNC POINTS A and
// C), pipe head and tail.

/// The model's pipe: its id, flits (one frame is one flit here).
const PIPE: u32 = 3;
const PIPE_FLITS: u32 = 4;
/// The notification buffer's id and RX ring slots.
const NBUF: u32 = 0;
const RX_RING: u32 = 2;
const FRAMES: u32 = 4;

/// How the NIC publishes a notification (the real step, or a weakened
/// copy).
type PublishFn = fn(&RxNotification, u32, u32, u64);

struct RxShared {
    mmio: Mmio,
    ring: [RxNotification; RX_RING as usize],
    pipe: Cells,
}

/// The NIC: delivers `FRAMES` one-flit frames into the pipe, where the
/// head it was last written leaves room, and notifies as the engine does:
/// a notification when none is outstanding (the frame path), and at a head
/// write while data is pending (the reactive rule). Ends once software has
/// handed every frame back.
fn rx_nic(s: &RxShared, publish: PublishFn) {
    let pmask = PIPE_FLITS - 1;
    let rmask = RX_RING - 1;
    let (mut head, mut tail, mut outstanding) = (0u32, 0u32, false);
    let (mut nb_head, mut nb_tail) = (0u32, 0u32);
    let mut cons = 0;
    let mut delivered = 0;
    let notify = |tail: u32, nb_head: u32, nb_tail: &mut u32| {
        // One outstanding notification per pipe and head writes applied in
        // order: the ring (room for RX_RING - 1) never fills.
        assert!(
            ring_free(nb_head, *nb_tail, rmask) > 0,
            "notification ring full"
        );
        let slot = &s.ring[*nb_tail as usize];
        // The slot was handed back by a head write after software emptied
        // it (the head write's posting orders the clear before it).
        assert_eq!(slot.signal.load(Ordering::Relaxed), layout::signal::EMPTY);
        publish(slot, PIPE, tail, 0);
        *nb_tail = (*nb_tail + 1) & rmask;
    };
    loop {
        for (addr, value) in take_writes(&s.mmio, &mut cons, MMIO_N) {
            match split_reg_addr(addr).expect("a register") {
                (q, reg::RX_HEAD) if q == PIPE => {
                    // As the engine's `pipe_head_write`: never beyond the
                    // tail.
                    assert!(ring_used(head, value, pmask) <= ring_used(head, tail, pmask));
                    head = value;
                    if head == tail {
                        outstanding = false;
                    } else {
                        notify(tail, nb_head, &mut nb_tail);
                        outstanding = true;
                    }
                }
                (q, reg::RX_HEAD) if q == layout::NBUF_QUEUE_BASE + NBUF => {
                    // Only over notifications the NIC wrote.
                    assert!(ring_used(nb_head, value, rmask) <= ring_used(nb_head, nb_tail, rmask));
                    nb_head = value;
                }
                other => panic!("unexpected register write {other:?}"),
            }
        }
        if delivered < FRAMES {
            if ring_free(head, tail, pmask) >= 1 {
                s.pipe.write(tail as usize, delivered + 1);
                tail = (tail + 1) & pmask;
                delivered += 1;
                if !outstanding {
                    notify(tail, nb_head, &mut nb_tail);
                    outstanding = true;
                }
                continue;
            }
        } else if head == tail {
            return; // everything handed back
        }
        spin_loop();
    }
}

/// Software, as the library's `poll` and `recv`/free: takes notifications,
/// hands the ring slots back, reads the frames up to the notified tail and
/// hands them back with a pipe head write.
fn rx_app(s: &RxShared) {
    let pmask = PIPE_FLITS - 1;
    let mut p = Poster::default();
    let (mut rx_head, mut freed, mut known_tail) = (0u32, 0u32, 0u32);
    let mut since_head_write = 0;
    let mut received = 0;
    while received < FRAMES {
        let Some((pid, tail)) = s.ring[rx_head as usize].take(None) else {
            spin_loop();
            continue;
        };
        assert_eq!(pid, PIPE);
        since_head_write += 1;
        assert_eq!(
            since_head_write, 1,
            "two notifications for the pipe outstanding"
        );
        // The tail only moves forwards, and never onto bytes not handed
        // back.
        assert!(ring_used(freed, tail, pmask) >= ring_used(freed, known_tail, pmask));
        known_tail = tail;
        rx_head = (rx_head + 1) & (RX_RING - 1);
        p.write(
            &s.mmio,
            reg_addr(layout::NBUF_QUEUE_BASE + NBUF, reg::RX_HEAD),
            rx_head,
            Mmio::post,
        );
        while freed != tail {
            assert_eq!(s.pipe.read(freed as usize), received + 1, "frame bytes");
            received += 1;
            freed = (freed + 1) & pmask;
        }
        p.write(&s.mmio, reg_addr(PIPE, reg::RX_HEAD), freed, Mmio::post);
        since_head_write = 0;
    }
}

fn rx_model(publish: PublishFn) {
    let s = Arc::new(RxShared {
        mmio: Mmio::default(),
        ring: Default::default(),
        pipe: Cells::new(PIPE_FLITS as usize),
    });
    let app = {
        let s = s.clone();
        thread::spawn(move || rx_app(&s))
    };
    rx_nic(&s, publish);
    app.join().unwrap();
}

#[test]
fn rx_frames_are_read_only_once_notified_and_rewritten_only_once_handed_back() {
    check(3, || rx_model(RxNotification::publish));
}

// ---------------------------------------------------------------------
// TX notifications (SYNC POINTS A and D).

const TX_RING: u32 = 4;
/// Notifications in flight at most (the library's credits).
const TX_CREDITS: u32 = 2;
const SENDS: u32 = 3;
/// Data buffers, used in turn: the third send reuses the first's.
const TX_BUFS: u32 = TX_CREDITS;

/// How the NIC completes a notification (the real step, or a weakened copy).
type CompleteFn = fn(&TxNotification, Option<u64>);

struct TxShared {
    mmio: Mmio,
    ring: [TxNotification; TX_RING as usize],
    data: Cells,
}

/// Software, as the library's `push_data`, `flush_tx` and
/// `reap_completions`: fills a slot and its data, posts the TX tail, and
/// reuses a slot and its data only once the NIC completed it.
fn tx_app(s: &TxShared) {
    let mask = TX_RING - 1;
    let mut p = Poster::default();
    let (mut tail, mut done, mut inflight) = (0u32, 0u32, 0u32);
    let mut sent = 0;
    while sent < SENDS || inflight > 0 {
        while inflight > 0 && s.ring[done as usize].completed(None) {
            done = (done + 1) & mask;
            inflight -= 1;
        }
        if sent == SENDS || inflight >= TX_CREDITS {
            spin_loop();
            continue;
        }
        let buf = sent % TX_BUFS;
        s.data.write(buf as usize, 1000 + sent);
        s.ring[tail as usize].fill_data(u64::from(buf), 64 + sent, 0);
        tail = (tail + 1) & mask;
        inflight += 1;
        sent += 1;
        p.write(
            &s.mmio,
            reg_addr(layout::NBUF_QUEUE_BASE + NBUF, reg::TX_TAIL),
            tail,
            Mmio::post,
        );
    }
}

/// The NIC, as the engine's `process_tx`: reads the notifications up to
/// the tail software wrote, reads their data, completes them in order.
fn tx_nic(s: &TxShared, complete: CompleteFn) {
    let mask = TX_RING - 1;
    let (mut head, mut tail, mut cons) = (0u32, 0u32, 0);
    let mut read = 0;
    while read < SENDS {
        for (addr, value) in take_writes(&s.mmio, &mut cons, MMIO_N) {
            assert_eq!(addr, reg_addr(layout::NBUF_QUEUE_BASE + NBUF, reg::TX_TAIL));
            // The tail only moves forwards, never past slots not completed.
            assert!(ring_used(head, value, mask) >= ring_used(head, tail, mask));
            assert!(ring_used(head, value, mask) <= TX_CREDITS);
            tail = value;
        }
        if head == tail {
            spin_loop();
            continue;
        }
        let n = &s.ring[head as usize];
        match n.read() {
            TxRequest::Data {
                address,
                length,
                port,
            } => {
                let buf = u64::from(read % TX_BUFS);
                assert_eq!((address, length, port), (buf, 64 + read, 0));
                assert_eq!(s.data.read(address as usize), 1000 + read, "data");
            }
            other => panic!("slot {head} read as {other:?}"),
        }
        complete(n, None);
        head = (head + 1) & mask;
        read += 1;
    }
}

fn tx_model(complete: CompleteFn) {
    let s = Arc::new(TxShared {
        mmio: Mmio::default(),
        ring: Default::default(),
        data: Cells::new(TX_BUFS as usize),
    });
    let app = {
        let s = s.clone();
        thread::spawn(move || tx_app(&s))
    };
    tx_nic(&s, complete);
    app.join().unwrap();
}

#[test]
fn tx_notifications_are_read_as_filled_and_reused_only_once_completed() {
    check(3, || tx_model(TxNotification::complete));
}

// ---------------------------------------------------------------------
// The packetized interface's descriptor rings (SYNC POINTS A, E and F).

const DESCS: u32 = 4;
const BUFS: u32 = 2;
const RX_FRAMES: u32 = 3;

/// How the NIC writes back an RX descriptor (the real step, or a weakened
/// copy).
type HandBackFn = fn(&Descriptor, usize, u32);

struct DescShared {
    mmio: Mmio,
    ring: [Descriptor; DESCS as usize],
    bufs: Cells,
}

/// Software, as the library's `rx_burst` and `refill`: posts descriptors
/// with buffers and rings the doorbell, takes frames from descriptors with
/// DD, and posts their buffers again.
fn desc_rx_app(s: &DescShared) {
    let mask = DESCS - 1;
    let doorbell = reg_addr(layout::DESC_QUEUE_BASE, reg::RX_TAIL);
    let mut p = Poster::default();
    let mut bufs_of = [u32::MAX; DESCS as usize];
    let (mut next, mut tail) = (0u32, 0u32);
    for b in 0..BUFS {
        s.ring[tail as usize].post_rx(u64::from(b));
        bufs_of[tail as usize] = b;
        tail = (tail + 1) & mask;
    }
    p.write(&s.mmio, doorbell, tail, Mmio::post);
    let mut received = 0;
    while received < RX_FRAMES {
        // Only slots posted to the NIC.
        let qw1 = match s.ring[next as usize].rx_done() {
            Some(qw1) if next != tail => qw1,
            _ => {
                spin_loop();
                continue;
            }
        };
        let len = (qw1 >> 32) & desc::LEN_MASK;
        assert_eq!(qw1 & (desc::RX_ERR | desc::RX_EOP), desc::RX_EOP);
        assert_eq!(len, 60 + u64::from(received), "length");
        assert_eq!(s.ring[next as usize].rx_hash(), 7 * received, "hash");
        let b = bufs_of[next as usize];
        assert_eq!(s.bufs.read(b as usize), received + 1, "frame bytes");
        received += 1;
        next = (next + 1) & mask;
        // Refill at once (the library waits for a block of them).
        s.ring[tail as usize].post_rx(u64::from(b));
        bufs_of[tail as usize] = b;
        tail = (tail + 1) & mask;
        p.write(&s.mmio, doorbell, tail, Mmio::post);
    }
}

/// The NIC, as the engine's `deliver_desc`: a frame into each descriptor
/// the doorbell handed it, then the write-back.
fn desc_rx_nic(s: &DescShared, hand_back: HandBackFn) {
    let mask = DESCS - 1;
    let (mut head, mut tail, mut cons) = (0u32, 0u32, 0);
    let mut delivered = 0;
    while delivered < RX_FRAMES {
        for (addr, value) in take_writes(&s.mmio, &mut cons, MMIO_N) {
            assert_eq!(addr, reg_addr(layout::DESC_QUEUE_BASE, reg::RX_TAIL));
            // As the engine's RX_TAIL check: never past its own head.
            let add = ring_used(tail, value, mask);
            assert!(ring_used(head, tail, mask) + add <= mask);
            tail = value;
        }
        if head == tail {
            spin_loop(); // no descriptor: the engine would drop the frame
            continue;
        }
        let d = &s.ring[head as usize];
        let buf = d.rx_buffer();
        assert!(buf < u64::from(BUFS), "buffer {buf}");
        s.bufs.write(buf as usize, delivered + 1);
        hand_back(d, 60 + delivered as usize, 7 * delivered);
        head = (head + 1) & mask;
        delivered += 1;
    }
}

fn desc_rx_model(hand_back: HandBackFn) {
    let s = Arc::new(DescShared {
        mmio: Mmio::default(),
        ring: Default::default(),
        bufs: Cells::new(BUFS as usize),
    });
    let app = {
        let s = s.clone();
        thread::spawn(move || desc_rx_app(&s))
    };
    desc_rx_nic(&s, hand_back);
    app.join().unwrap();
}

#[test]
fn rx_descriptors_with_dd_hold_their_frame_and_length() {
    check(3, || desc_rx_model(Descriptor::hand_back_rx));
}

#[test]
fn tx_buffers_are_reclaimed_only_after_the_rs_descriptors_dd() {
    check(3, || {
        let s = Arc::new(DescShared {
            mmio: Mmio::default(),
            ring: Default::default(),
            bufs: Cells::new(BUFS as usize),
        });
        let nic = {
            let s = s.clone();
            thread::spawn(move || {
                let mut cons = 0;
                let mut tail = 0;
                while tail == 0 {
                    for (_, value) in take_writes(&s.mmio, &mut cons, MMIO_N) {
                        tail = value;
                    }
                    spin_loop();
                }
                assert_eq!(tail, BUFS);
                for i in 0..BUFS {
                    let d = &s.ring[i as usize];
                    let (qw0, qw1) = d.read_tx();
                    assert_eq!(qw0, u64::from(i));
                    assert_eq!(qw1 & desc::LEN_MASK, 64 + u64::from(i));
                    assert_eq!(s.bufs.read(qw0 as usize), 500 + i, "frame bytes");
                    // As the engine: a write-back on RS descriptors only.
                    if qw1 & desc::TX_RS != 0 {
                        d.write_back_tx(qw1 | desc::TX_DD);
                    }
                }
            })
        };
        let mut p = Poster::default();
        for i in 0..BUFS {
            s.bufs.write(i as usize, 500 + i);
            let rs = if i == BUFS - 1 { desc::TX_RS } else { 0 };
            s.ring[i as usize].post_tx(u64::from(i), (64 + u64::from(i)) | desc::TX_EOP | rs);
        }
        p.write(
            &s.mmio,
            reg_addr(layout::DESC_QUEUE_BASE, reg::TX_TAIL),
            BUFS,
            Mmio::post,
        );
        // The DD of the last (RS) descriptor frees every buffer up to it.
        while !s.ring[BUFS as usize - 1].tx_done() {
            spin_loop();
        }
        assert!(!s.ring[0].tx_done(), "DD only where RS was asked");
        for i in 0..BUFS {
            s.bufs.write(i as usize, 0); // reused
        }
        nic.join().unwrap();
    });
}

// ---------------------------------------------------------------------
// The same models with one Release store weakened to Relaxed: loom must
// find the interleaving in which the other side sees the flag before the
// data it publishes.

fn post_relaxed(q: &Mmio, producer: u32, addr: u32, value: u32, issued_ns: u64) {
    let e = &q.entries[producer as usize % MMIO_N];
    e.word
        .store((addr as u64) << 32 | value as u64, Ordering::Relaxed);
    e.issued_ns.store(issued_ns, Ordering::Relaxed);
    // Deliberately too weak: nothing orders the entry before the producer.
    q.producer
        .0
        .store(producer.wrapping_add(1), Ordering::Relaxed);
}

fn publish_relaxed(n: &RxNotification, pipe_id: u32, tail: u32, visible_ns: u64) {
    n.pipe_id.store(pipe_id, Ordering::Relaxed);
    n.tail.store(tail, Ordering::Relaxed);
    n.visible_ns.store(visible_ns, Ordering::Relaxed);
    // Deliberately too weak: the frame bytes are not ordered before it.
    n.signal.store(layout::signal::DATA, Ordering::Relaxed);
}

fn complete_relaxed(n: &TxNotification, _visible_ns: Option<u64>) {
    // Deliberately too weak: the NIC's read of the data is not ordered
    // before software's reuse of it.
    n.signal.store(layout::signal::EMPTY, Ordering::Relaxed);
}

fn hand_back_relaxed(d: &Descriptor, len: usize, hash: u32) {
    d.qw0.store(u64::from(hash), Ordering::Relaxed);
    // Deliberately too weak: the frame is not ordered before DD.
    d.qw1.store(
        desc::RX_DD | desc::RX_EOP | (len as u64) << 32,
        Ordering::Relaxed,
    );
}

#[test]
fn a_relaxed_producer_store_is_caught() {
    check_fails(3, || posted_writes_model(post_relaxed));
}

#[test]
fn a_relaxed_notification_signal_is_caught() {
    check_fails(3, || rx_model(publish_relaxed));
}

#[test]
fn a_relaxed_completion_is_caught() {
    check_fails(3, || tx_model(complete_relaxed));
}

#[test]
fn a_relaxed_dd_write_back_is_caught() {
    check_fails(3, || desc_rx_model(hand_back_relaxed));
}

/// Parking (`enso_abi::wake`): two wakers (two applications' doorbells)
/// each publish work (here a flag) and then ask whether the sleeper
/// sleeps; the sleeper announces its sleep, looks for work once more, and
/// would then wait on the sequence value it read. In every execution, for
/// each waker, either the sleeper sees its work, or that waker sees the
/// sleeper and moves the sequence on (so the sleeper's futex wait on the
/// old value returns at once): no wake-up is lost.
fn wake_model() {
    let s = Arc::new(enso_abi::wake::Sleeper::default());
    let work = Arc::new([
        enso_abi::sync::AtomicU32::new(0),
        enso_abi::sync::AtomicU32::new(0),
    ]);
    let wakers: Vec<_> = (0..2)
        .map(|i| {
            let (s2, w2) = (s.clone(), work.clone());
            thread::spawn(move || {
                w2[i].store(1, Ordering::Release);
                s2.should_wake()
            })
        })
        .collect();
    let seq = s.prepare();
    let saw = [0, 1].map(|i| work[i].load(Ordering::Acquire) == 1);
    let woke: Vec<bool> = wakers.into_iter().map(|w| w.join().unwrap()).collect();
    for i in 0..2 {
        if !saw[i] {
            assert!(
                woke[i],
                "the sleeper missed waker {i}'s work and it did not wake it"
            );
            assert_ne!(
                s.word().load(Ordering::Relaxed),
                seq,
                "its wait would block"
            );
        }
    }
    s.done();
}

#[test]
fn a_sleeper_either_sees_the_work_or_is_woken() {
    check(3, wake_model);
}

/// `wake_model`'s protocol without its two SeqCst fences (each side's
/// store then its load of the other's, the store-buffering pattern): loom
/// finds the execution where both loads miss and the wake-up is lost.
fn wake_model_unfenced() {
    let parked = Arc::new(enso_abi::sync::AtomicU32::new(0));
    let work = Arc::new(enso_abi::sync::AtomicU32::new(0));
    let (p2, w2) = (parked.clone(), work.clone());
    let waker = thread::spawn(move || {
        w2.store(1, Ordering::Release);
        p2.load(Ordering::Acquire) == 1
    });
    parked.store(1, Ordering::Release);
    let saw_work = work.load(Ordering::Acquire) == 1;
    let woke = waker.join().unwrap();
    assert!(saw_work || woke);
}

#[test]
fn parking_without_its_fences_is_caught() {
    check_fails(3, wake_model_unfenced);
}
