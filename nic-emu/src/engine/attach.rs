//! Attaching and detaching applications: reserving pipe ids, descriptor
//! queues and a notification buffer, creating the shared memory, and
//! finishing an application's handed-over work before it goes.

use super::shared::{App, Nbuf, TxAssembler};
use super::state::{DescQueue, PipeState};
use super::step::Engine;
use super::{AttachInfo, AttachRequest};
use crate::counters::{AppCounters, PipeCounters, QueueCounters};
use crate::layout;
use crate::shm;
use enso_abi::control::ExtendRequest;

/// Rounds of register writes and TX work the engine runs for an
/// application that detaches, to send what it had handed over
/// ([`Engine::detach`]).
const DETACH_DRAIN_ROUNDS: usize = 1024;

/// Why an attach was refused.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// Too few free pipes for the pipes asked for.
    #[error("not enough free pipe ids for {0} pipes")]
    NoPipes(u32),
    /// No notification buffer is free.
    #[error("no free notification buffer")]
    NoNbuf,
    /// Too few free descriptor queues for the queues asked for.
    #[error("not enough free descriptor queues for {0}")]
    NoQueues(u32),
    #[error(
        "a DMA region of {asked} bytes was asked for; this device accepts {min}..={max} bytes"
    )]
    /// The DMA region asked for is too small or too large.
    BadRegionSize {
        /// Bytes asked for.
        asked: usize,
        /// The fewest bytes accepted.
        min: usize,
        /// The most bytes accepted.
        max: usize,
    },
    /// No attached application has this id.
    #[error("no application {0} is attached")]
    NoApp(u32),
    /// The pipe ids after an application's are taken, or beyond the
    /// device's.
    #[error(
        "cannot grow application {app}'s pipes {base}..{end} to {want}: the ids after them are \
         taken by another application or beyond the device's {max}"
    )]
    NoRoom {
        /// The application.
        app: u32,
        /// Its first pipe id.
        base: u32,
        /// The id after its last.
        end: u32,
        /// Pipe ids asked for in all.
        want: u32,
        /// The device's pipe ids.
        max: u32,
    },
    /// Mapping the application's shared memory failed.
    #[error("creating shared memory: {0}")]
    Io(#[from] std::io::Error),
}

impl Engine {
    /// Attaches an application: reserves pipe ids and a notification buffer
    /// and creates its DMA region and posted-write queue (mode 0600).
    pub fn attach(&mut self, req: &AttachRequest) -> Result<AttachInfo, AttachError> {
        let (min, max) = (layout::DMA_RESERVED + layout::PAGE, self.cfg.max_dma_bytes);
        if !(min..=max).contains(&req.dma_bytes) {
            return Err(AttachError::BadRegionSize {
                asked: req.dma_bytes,
                min,
                max,
            });
        }
        let n = req.pipes as usize;
        let pipe_base =
            roomy_free_run(&self.pipe_used, n).ok_or(AttachError::NoPipes(req.pipes))?;
        let nbuf = first_free_run(&self.nbuf_used, 1).ok_or(AttachError::NoNbuf)?;
        let nq = req.desc_queues as usize;
        let desc_base =
            first_free_run(&self.desc_used, nq).ok_or(AttachError::NoQueues(req.desc_queues))?;
        let id = self.next_app_id;
        let dma_len = req.dma_bytes.next_multiple_of(layout::PAGE);
        let name = &self.cfg.name;
        let dma_file = shm::SealedFile::create(&format!("enso-{name}-app-{id}.dma"), dma_len)?;
        let mmio_file =
            shm::SealedFile::create(&format!("enso-{name}-app-{id}.mmio"), layout::MMIO_FILE_LEN)?;
        let region = shm::map(dma_file.file(), dma_len)?;
        let mmio = shm::map(mmio_file.file(), layout::MMIO_FILE_LEN)?;
        self.next_app_id += 1;
        self.pipe_used[pipe_base..pipe_base + n].fill(true);
        self.nbuf_used[nbuf] = true;
        self.desc_used[desc_base..desc_base + nq].fill(true);
        for p in pipe_base..pipe_base + n {
            self.core.pipes[p] = PipeState::default();
            self.core.pipe_counters[p] = PipeCounters::default();
        }
        let app = App {
            id,
            region,
            region_len: dma_len,
            mmio,
            mmio_consumer: 0,
            looked_step: u64::MAX,
            pipe_base: pipe_base as u32,
            pipe_count: n as u32,
            desc_base: desc_base as u32,
            desc_count: nq as u32,
            nbuf_id: nbuf as u32,
            nb: Nbuf::default(),
            tx: None,
            asm: TxAssembler::new(),
            rx_spans: Vec::new(),
            owed: Vec::new(),
            counters: AppCounters::default(),
            rules: 0,
            _files: [dma_file, mmio_file],
        };
        let slot = match self.core.apps.iter().position(Option::is_none) {
            Some(s) => s,
            None => {
                self.core.apps.push(None);
                self.core.apps.len() - 1
            }
        };
        for p in pipe_base..pipe_base + n {
            self.core.pipes[p].owner = slot as u32;
        }
        for q in desc_base..desc_base + nq {
            self.core.dqs[q] = DescQueue::default();
            self.core.dqs[q].owner = slot as u32;
            self.core.dq_counters[q] = QueueCounters::default();
        }
        self.core.apps[slot] = Some(app);
        self.core.reset_port_cfg(slot);
        Ok(self.info_of(slot))
    }

    /// What application `slot` was told at attach, with its pipe ids as
    /// they now stand.
    fn info_of(&self, slot: usize) -> AttachInfo {
        let app = self.core.apps[slot].as_ref().expect("caller checked");
        AttachInfo {
            app_id: app.id,
            device: self.cfg.name.clone(),
            dma_path: app._files[0].path().into(),
            dma_len: app.region_len,
            mmio_path: app._files[1].path().into(),
            pipe_base: app.pipe_base,
            pipe_count: app.pipe_count,
            nbuf_id: app.nbuf_id,
            pipe_size: self.cfg.pipe_size,
            notif_ring_entries: self.cfg.notif_ring_entries,
            notification_mode: self.cfg.notification_mode,
            ports: self.ports.len(),
            interconnect_latency_ns: self.cfg.interconnect_latency_ns,
            desc_queue_base: app.desc_base,
            desc_queue_count: app.desc_count,
            wake_path: Some(self.wake.path().to_path_buf()),
        }
    }

    /// Grants application `req.app_id` the pipe ids that follow its own,
    /// up to `req.pipes` in all: they start disabled, as at attach. Its
    /// ids stay one range, so the ids after it must be free (attach leaves
    /// room after each application, `roomy_free_run`). Asking for no
    /// more than it holds changes nothing. Its DMA region is not changed:
    /// the bounds checks on what its registers name stay as they were.
    pub fn extend(&mut self, req: &ExtendRequest) -> Result<AttachInfo, AttachError> {
        let slot = self
            .core
            .apps
            .iter()
            .position(|a| a.as_ref().is_some_and(|a| a.id == req.app_id))
            .ok_or(AttachError::NoApp(req.app_id))?;
        let app = self.core.apps[slot].as_ref().expect("slot found above");
        let (base, count) = (app.pipe_base as usize, app.pipe_count as usize);
        let want = req.pipes as usize;
        if want <= count {
            return Ok(self.info_of(slot));
        }
        let end = base + count;
        let free = base + want <= self.pipe_used.len()
            && !self.pipe_used[end..base + want].iter().any(|&u| u);
        if !free {
            return Err(AttachError::NoRoom {
                app: req.app_id,
                base: base as u32,
                end: end as u32,
                want: req.pipes,
                max: self.pipe_used.len() as u32,
            });
        }
        self.pipe_used[end..base + want].fill(true);
        for p in end..base + want {
            self.core.pipes[p] = PipeState::default();
            self.core.pipes[p].owner = slot as u32;
            self.core.pipe_counters[p] = PipeCounters::default();
        }
        let app = self.core.apps[slot].as_mut().expect("slot found above");
        app.pipe_count = want as u32;
        Ok(self.info_of(slot))
    }

    /// Detaches application `app_id`: disables its pipes, removes its flow
    /// rules and fallback entries, deletes its files. Its counters are kept in
    /// the device totals.
    pub fn detach(&mut self, app_id: u32) -> bool {
        let Some(slot) = self
            .core
            .apps
            .iter()
            .position(|a| a.as_ref().is_some_and(|a| a.id == app_id))
        else {
            return false;
        };
        self.drain_before_detach(slot);
        let app = self.core.apps[slot].take().expect("slot found above");
        // Its timestamping and rate limits end with it.
        self.core.reset_port_cfg(slot);
        self.core.detached_apps.add(&app.counters);
        let range = app.pipe_base as usize..(app.pipe_base + app.pipe_count) as usize;
        for p in range.clone() {
            let c = std::mem::take(&mut self.core.pipe_counters[p]);
            self.core.detached_pipes.add(&c);
            self.core.pipes[p] = PipeState::default();
        }
        let qrange = app.desc_base as usize..(app.desc_base + app.desc_count) as usize;
        for q in qrange.clone() {
            let c = std::mem::take(&mut self.core.dq_counters[q]);
            self.core.detached_queues.add(&c);
            self.core.dqs[q] = DescQueue::default();
        }
        self.desc_used[qrange].fill(false);
        let owned = |t: u32| app.owns_target(t);
        self.core.flows.retain(owned);
        for f in &mut self.core.fallback {
            f.retain(|p| !owned(p));
        }
        self.pipe_used[range].fill(false);
        self.nbuf_used[app.nbuf_id as usize] = false;
        true
    }

    /// Sends what application `slot` handed the NIC before it detached:
    /// the register writes it had posted, then the TX notifications and
    /// descriptors they published, as a device finishes the work a queue
    /// was given before the queue is disabled. Without this, frames the
    /// application counted as sent were lost uncounted whenever a detach
    /// came between its last tail write and the engine's next look at its
    /// registers (an echo server ending a run: 16 736 frames of 86.5
    /// million once). What a port's rate limit or a full cable still holds
    /// back after [`DETACH_DRAIN_ROUNDS`] rounds is counted:
    /// `tx_notifications_discarded` and `tx_descriptors_discarded`.
    fn drain_before_detach(&mut self, slot: usize) {
        // Writes still crossing the emulated interconnect arrive by then.
        let now = self.core.now.saturating_add(self.core.latency);
        for _ in 0..DETACH_DRAIN_ROUNDS {
            let Self { core, ports, .. } = self;
            let mut work = core.drain_mmio(slot, now);
            work += core.process_tx(slot, ports, now);
            work += core.process_desc_tx(slot, ports, now);
            core.flush_desc_writebacks(slot);
            if work == 0 {
                break;
            }
        }
        let core = &mut self.core;
        let mask = core.ring_mask;
        let app = core.apps[slot].as_mut().expect("caller checked");
        let nb = &app.nb;
        let mut left = u64::from(nb.tx_tail.wrapping_sub(nb.tx_head) & mask);
        if app.tx.is_some() && left == 0 {
            left = 1;
        }
        app.counters.tx_notifications_discarded += left;
        for q in app.desc_base..app.desc_base + app.desc_count {
            let dq = &core.dqs[q as usize];
            app.counters.tx_descriptors_discarded += u64::from(dq.tx_pending());
        }
    }

    /// Ids of attached applications.
    pub fn app_ids(&self) -> Vec<u32> {
        self.core.apps.iter().flatten().map(|a| a.id).collect()
    }

    /// Removes every application's files and the control socket, and
    /// finishes the ports' backends (files flushed, threads stopped).
    pub fn cleanup(&mut self) {
        for id in self.app_ids() {
            self.detach(id);
        }
        self.finish_ports();
    }

    /// Finishes the ports' backends: frames still queued are written or
    /// sent, files flushed, I/O threads stopped, so that their counters
    /// are final. A port finishes once; later calls do nothing.
    pub fn finish_ports(&mut self) {
        for p in &mut self.ports {
            p.finish();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.cleanup();
        crate::cleanup::unregister(&self.cfg.device_dir());
    }
}

impl enso_abi::control::SteppedNic for Engine {
    fn ring_sizes(&self) -> (usize, u32) {
        (self.cfg.pipe_size, self.cfg.notif_ring_entries)
    }
    fn attach(
        &mut self,
        req: &AttachRequest,
    ) -> Result<AttachInfo, enso_abi::control::LocalNicError> {
        Ok(Engine::attach(self, req)?)
    }
}

/// Where a new application's `n` pipe ids go: in the longest run of free
/// ids (the lowest of equal ones), at its start if it starts at id 0, else
/// in its middle, so that the new application and the one before it both
/// have free ids after theirs to grow into ([`Engine::extend`]). The same
/// free ids give the same place.
fn roomy_free_run(used: &[bool], n: usize) -> Option<usize> {
    if n == 0 {
        return Some(0);
    }
    let (mut best, mut best_len) = (0, 0);
    let mut start = 0;
    for (i, &u) in used.iter().chain(std::iter::once(&true)).enumerate() {
        if u {
            if i - start > best_len {
                (best, best_len) = (start, i - start);
            }
            start = i + 1;
        }
    }
    let room = |len: usize| if best == 0 { 0 } else { (len - n) / 2 };
    (best_len >= n).then(|| best + room(best_len))
}

fn first_free_run(used: &[bool], n: usize) -> Option<usize> {
    if n == 0 {
        return Some(0);
    }
    let mut run = 0;
    for (i, &u) in used.iter().enumerate() {
        run = if u { 0 } else { run + 1 };
        if run == n {
            return Some(i + 1 - n);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{first_free_run, roomy_free_run, AttachError, AttachRequest, Engine};
    use crate::config::{DeviceConfig, WireConfig};
    use crate::layout::MAX_PIPES;
    use enso_abi::control::ExtendRequest;

    fn engine(dir: &std::path::Path) -> Engine {
        let mut cfg = DeviceConfig::new("extend", WireConfig::Null);
        cfg.dir = dir.to_path_buf();
        cfg.pipe_size = 64 << 10;
        cfg.notif_ring_entries = 256;
        Engine::new(cfg).unwrap()
    }

    fn req(pipes: u32) -> AttachRequest {
        AttachRequest {
            pipes,
            dma_bytes: 1 << 20,
            desc_queues: 0,
        }
    }

    #[test]
    fn extend_grants_the_ids_after_an_application_up_to_its_neighbour() {
        let dir = tempfile::tempdir().unwrap();
        let mut e = engine(dir.path());
        let a = e.attach(&req(4)).unwrap();
        let b = e.attach(&req(4)).unwrap();
        assert_eq!(a.pipe_base, 0);
        assert_eq!(b.pipe_base, 4 + (MAX_PIPES - 4 - 4) / 2);
        let ext = |e: &mut Engine, app_id, pipes| e.extend(&ExtendRequest { app_id, pipes });
        // Granted: the ids after its own, everything else unchanged.
        let a2 = ext(&mut e, a.app_id, 100).unwrap();
        assert_eq!((a2.pipe_base, a2.pipe_count), (0, 100));
        assert_eq!(
            (a2.dma_path.clone(), a2.dma_len, a2.nbuf_id),
            (a.dma_path.clone(), a.dma_len, a.nbuf_id)
        );
        // Asking for no more changes nothing.
        assert_eq!(ext(&mut e, a.app_id, 3).unwrap().pipe_count, 100);
        // Up to the neighbour's first id, not one more.
        assert_eq!(
            ext(&mut e, a.app_id, b.pipe_base).unwrap().pipe_count,
            b.pipe_base
        );
        match ext(&mut e, a.app_id, b.pipe_base + 1) {
            Err(AttachError::NoRoom { want, max, .. }) => {
                assert_eq!((want, max), (b.pipe_base + 1, MAX_PIPES))
            }
            r => panic!("{r:?}"),
        }
        // The last one grows to the device's end, not past it.
        let most = MAX_PIPES - b.pipe_base;
        assert_eq!(ext(&mut e, b.app_id, most).unwrap().pipe_count, most);
        assert!(matches!(
            ext(&mut e, b.app_id, most + 1),
            Err(AttachError::NoRoom { .. })
        ));
        assert!(matches!(ext(&mut e, 999, 8), Err(AttachError::NoApp(999))));
        // Every id is taken: a third application finds none.
        assert!(matches!(e.attach(&req(1)), Err(AttachError::NoPipes(1))));
        // Detached, an application's grown ids are free again.
        assert!(e.detach(a.app_id));
        assert_eq!(e.attach(&req(1)).unwrap().pipe_base, 0);
    }

    #[test]
    fn roomy_free_run_starts_in_the_middle_of_the_longest_run() {
        // Everything free: at the start, all of it to grow into.
        assert_eq!(roomy_free_run(&[false; 100], 10), Some(0));
        // After one application: the middle, room on both sides.
        let mut used = [false; 100];
        used[0] = true;
        assert_eq!(roomy_free_run(&used, 9), Some(1 + (99 - 9) / 2));
        // The longest run is 10..100 (90 ids), not 0..8.
        let mut used = [false; 100];
        used[8..10].fill(true);
        assert_eq!(roomy_free_run(&used, 10), Some(10 + (90 - 10) / 2));
        // Equal runs: the lowest (which starts at 0).
        let mut used = [false; 9];
        used[4] = true;
        assert_eq!(roomy_free_run(&used, 2), Some(0));
        // Exactly long enough, at the very end.
        assert_eq!(roomy_free_run(&[true, true, false, false], 2), Some(2));
        assert_eq!(roomy_free_run(&[true, false, true, false], 2), None);
        assert_eq!(roomy_free_run(&[], 1), None);
        assert_eq!(roomy_free_run(&[true; 3], 0), Some(0));
    }

    #[test]
    fn first_free_run_finds_the_lowest_run_long_enough() {
        assert_eq!(first_free_run(&[false; 4], 2), Some(0));
        assert_eq!(
            first_free_run(&[true, false, true, false, false], 2),
            Some(3)
        );
        assert_eq!(
            first_free_run(&[true, false, true, false, false], 1),
            Some(1)
        );
        assert_eq!(
            first_free_run(&[false, true, false, false, false], 3),
            Some(2)
        );
        // A run of exactly the length at the very end.
        assert_eq!(first_free_run(&[true, true, false, false], 2), Some(2));
    }

    #[test]
    fn first_free_run_refuses_what_does_not_fit() {
        assert_eq!(first_free_run(&[true, false, true, false], 2), None);
        assert_eq!(first_free_run(&[true; 3], 1), None);
        assert_eq!(first_free_run(&[false; 3], 4), None);
        assert_eq!(first_free_run(&[], 1), None);
    }

    #[test]
    fn first_free_run_of_nothing_is_at_zero() {
        // An application asking for no descriptor queues gets base 0
        // and reserves nothing, even where everything is taken.
        assert_eq!(first_free_run(&[true; 3], 0), Some(0));
        assert_eq!(first_free_run(&[], 0), Some(0));
    }
}
