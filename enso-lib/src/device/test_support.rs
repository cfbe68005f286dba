//! A fake standalone device for the attach and liveness tests: an
//! answer to send, its files, and a control socket that sends it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use enso_abi::control::{AttachInfo, NotificationMode};
use enso_abi::{layout, shm};

use super::attach::region_bytes;
use super::DeviceOptions;

pub(super) fn opts() -> DeviceOptions {
    DeviceOptions {
        pipes: 2,
        tx_pipes: 0,
        ..Default::default()
    }
}

/// An honest answer for `opts()` (64 KiB pipes, 256-entry rings), naming
/// files `tag.dma` and `tag.mmio` in `dir` (not created).
pub(super) fn answer(dir: &Path, tag: &str) -> AttachInfo {
    let (pipe_size, entries) = (64 << 10, 256);
    AttachInfo {
        app_id: 1,
        device: "fake".into(),
        dma_path: dir.join(format!("{tag}.dma")),
        dma_len: region_bytes(&opts(), pipe_size, entries),
        mmio_path: dir.join(format!("{tag}.mmio")),
        pipe_base: 0,
        pipe_count: 2,
        nbuf_id: 0,
        pipe_size,
        notif_ring_entries: entries,
        notification_mode: NotificationMode::Reactive,
        ports: 1,
        interconnect_latency_ns: 0,
        desc_queue_base: 0,
        desc_queue_count: 0,
        wake_path: None,
    }
}

/// A device in `dir` whose control socket answers up to two attach
/// requests with `info`; returns how many it answered so far.
pub(super) fn fake_device(dir: &Path, name: &str, info: AttachInfo) -> Arc<AtomicUsize> {
    let devdir = dir.join(format!("enso-{name}"));
    std::fs::create_dir_all(&devdir).expect("device dir");
    let l = UnixListener::bind(devdir.join(enso_abi::control::CONTROL_SOCKET)).expect("bind");
    let answered = Arc::new(AtomicUsize::new(0));
    let count = answered.clone();
    std::thread::spawn(move || {
        for s in l.incoming().take(2) {
            let mut s = s.expect("accept");
            let mut line = String::new();
            BufReader::new(&s).read_line(&mut line).expect("request");
            let resp = enso_abi::control::ControlResponse::Attached(info.clone());
            let mut out = serde_json::to_string(&resp).expect("json");
            out.push('\n');
            count.fetch_add(1, Ordering::SeqCst);
            s.write_all(out.as_bytes()).expect("answer");
        }
    });
    answered
}

/// Creates the files `info` names: the DMA file `dma_file_len` bytes
/// long, the register file as long as it must be.
pub(super) fn create_files(info: &AttachInfo, dma_file_len: usize) {
    shm::create_file(&info.dma_path, dma_file_len).expect("dma file");
    shm::create_file(&info.mmio_path, layout::MMIO_FILE_LEN).expect("mmio file");
}
