//! The application thread of a trial: the clients, and the measured windows of each application.

#[allow(unused_imports)]
use super::*;

/// What one side counts: (units, packets, bytes, dropped).
pub(super) type Counts = (u64, u64, u64, u64);

/// The load, polled between application polls or on a thread of its own.
pub(super) trait Client: Send {
    fn poll(&mut self) -> Result<usize, LoadError>;
    /// Called once the warm-up is over.
    fn start_measuring(&mut self) {}
    fn latency(&self) -> Option<LatencyStats> {
        None
    }
    /// Whether the warm-up may end (the KV preload is done).
    fn ready(&self) -> bool {
        true
    }
}

impl Client for KvLoadClient {
    fn poll(&mut self) -> Result<usize, LoadError> {
        KvLoadClient::poll(self)
    }
    fn start_measuring(&mut self) {
        self.reset_latency();
    }
    fn latency(&self) -> Option<LatencyStats> {
        Some(self.report().latency)
    }
    fn ready(&self) -> bool {
        !self.preloading()
    }
}

/// Sends the log while fewer than `window` packets are unhandled (a sink
/// sends nothing back, so the application's progress is the credit).
pub(super) struct LogClient {
    pub(super) pipe: PipeClient,
    pub(super) src: LogSource,
    pub(super) handled: Arc<AtomicU64>,
    pub(super) window: u64,
}

impl Client for LogClient {
    fn poll(&mut self) -> Result<usize, LoadError> {
        let Self {
            pipe,
            src,
            handled,
            window,
        } = self;
        let unhandled = pipe
            .sent_frames
            .saturating_sub(handled.load(Ordering::Relaxed));
        let room = window.saturating_sub(unhandled).min(64) as usize;
        pipe.send_with(room, |b| src.next_frame(b))
    }
}

pub(super) struct Measured {
    pub(super) seconds: f64,
    pub(super) counts: Counts,
    pub(super) busy: Duration,
    pub(super) nic_before: Stats,
    pub(super) nic_after: Stats,
    pub(super) latency: Option<LatencyStats>,
}

pub(super) fn app_thread(
    nic: &Nic,
    app: AppKind,
    iface: Interface,
    pipes: u32,
    opts: &TrialOptions,
) -> Result<TrialResult, TrialError> {
    let stream = app == AppKind::Logmon && iface == Interface::Enso && opts.log_stream;
    let (m, unit, load, threads) = match app {
        AppKind::Maglev => {
            let cfg = MaglevConfig::default();
            let mut h = Maglev::new(backends(opts.maglev_backends), &cfg)
                .map_err(|e| TrialError::Config(e.to_string()))?;
            let m = packet_app(nic, iface, pipes, opts, &mut h, false)?;
            (m, "packets", "built-in generator".to_string(), 2)
        }
        AppKind::Telemetry => {
            let mut h = Telemetry::new(&opts.sketch, Duration::from_secs(3600))
                .map_err(|e| TrialError::Config(e.to_string()))?;
            let m = packet_app(nic, iface, pipes, opts, &mut h, true)?;
            (m, "packets", "built-in generator".to_string(), 2)
        }
        AppKind::Kv => {
            let mut server = KvServer::new(&ServerConfig {
                store: StoreConfig::default(),
                ..Default::default()
            })
            .map_err(|e| TrialError::Config(e.to_string()))?;
            let client = match opts.kv_load {
                KvLoad::Generator => {
                    kv_preload(&mut server, opts)?;
                    None
                }
                KvLoad::Client => Some(KvLoadClient::new(
                    Device::attach_nic(nic, client_options())?,
                    1,
                    KvLoadConfig {
                        workload: kv_workload(opts),
                        window_frames: opts.kv_window,
                        ..Default::default()
                    },
                )?),
            };
            let setup = pipes as usize + usize::from(client.is_some());
            let m = match iface {
                Interface::Enso => {
                    let mut d = EnsoReplyDriver::new(Device::attach_nic(
                        nic,
                        app_options(iface, pipes, true),
                    )?)?;
                    d.add_fallback_pipes_on(0, pipes)?;
                    wait_for_setup(nic, setup)?;
                    measure_kv(nic, opts, &mut d, &mut server, client)?
                }
                Interface::Packetized => {
                    let mut d = PacketizedReplyDriver::new(
                        Device::attach_nic(nic, app_options(iface, pipes, false))?,
                        opts.burst,
                    );
                    d.add_rss_queues_on(0, pipes)?;
                    wait_for_setup(nic, setup)?;
                    measure_kv(nic, opts, &mut d, &mut server, client)?
                }
            };
            let (load, threads) = match opts.kv_load {
                KvLoad::Generator => (
                    format!(
                        "built-in generator replaying {KV_REPLAY_FRAMES} request frames, {} in flight",
                        kv_generator_window(opts)
                    ),
                    2,
                ),
                KvLoad::Client => (
                    client_load("KV client", opts),
                    2 + u32::from(opts.client_core.is_some()),
                ),
            };
            (m, "requests", load, threads)
        }
        AppKind::Logmon => {
            let patterns = builtin_for(&opts.log_services)
                .map_err(|e| TrialError::Config(e.to_string()))
                .and_then(|p| {
                    LogPatterns::new(&p).map_err(|e| TrialError::Config(e.to_string()))
                })?;
            let handled = Arc::new(AtomicU64::new(0));
            let client = match opts.log_load {
                LogLoad::Generator => None,
                LogLoad::Client => Some(LogClient {
                    pipe: PipeClient::new(Device::attach_nic(nic, client_options())?, 1, false)?,
                    src: LogSource::new(trial_log(opts), opts.log_payload, true),
                    handled: handled.clone(),
                    window: opts.log_window.max(1),
                }),
            };
            let progress = Some(&*handled);
            let header = UDP_PAYLOAD_OFFSET as u64;
            let payload = opts.log_payload.clamp(1, LogSource::MAX_PAYLOAD) as u64;
            let m = if stream {
                let mut scanner = LogScanner::new(&patterns);
                let mut d =
                    EnsoStreamDriver::new(Device::attach_nic(nic, app_options(iface, 1, false))?);
                d.add_fallback_stream_pipe_on(0)?;
                wait_for_setup(nic, 1)?;
                let counts = move |d: &dyn AppDriver<LogScanner>, _: &LogScanner| -> Counts {
                    let b = d.stats().bytes;
                    (b.div_ceil(payload), b.div_ceil(payload), b, 0)
                };
                measure_log(nic, opts, &mut d, &mut scanner, counts, client, progress)?
            } else {
                let mut mon = LogMonitor::new(&patterns);
                let counts = move |d: &dyn AppDriver<LogMonitor>, _: &LogMonitor| -> Counts {
                    let s = d.stats();
                    (s.frames, s.frames, s.bytes - s.frames * header, s.dropped)
                };
                match iface {
                    Interface::Enso => {
                        let mut d =
                            EnsoDriver::new(Device::attach_nic(nic, app_options(iface, 1, false))?);
                        add_fallback_rx_pipes(&mut d, 0, 1)?;
                        wait_for_setup(nic, 1)?;
                        measure_log(nic, opts, &mut d, &mut mon, counts, client, progress)?
                    }
                    Interface::Packetized => {
                        let mut d = PacketizedDriver::new(
                            Device::attach_nic(nic, app_options(iface, 1, false))?,
                            opts.burst,
                        );
                        d.add_rss_queues_on(0, 1)?;
                        wait_for_setup(nic, 1)?;
                        measure_log(nic, opts, &mut d, &mut mon, counts, client, progress)?
                    }
                }
            };
            let (load, threads) = match opts.log_load {
                LogLoad::Generator => (
                    "built-in generator replaying the log, open loop (the surplus is dropped and counted)"
                        .to_string(),
                    2,
                ),
                LogLoad::Client => (
                    client_load("log client", opts),
                    2 + u32::from(opts.client_core.is_some()),
                ),
            };
            (m, "packets", load, threads)
        }
    };
    let (units, packets, bytes, dropped) = m.counts;
    let secs = m.seconds.max(1e-9);
    let u = units.max(1) as f64;
    let mut nic_drops = BTreeMap::new();
    let before = m.nic_before.drops();
    for (k, v) in m.nic_after.drops() {
        let d = v - before.get(k).copied().unwrap_or(0);
        if d > 0 {
            nic_drops.insert(k.to_string(), d);
        }
    }
    let nic_busy = m.nic_after.engine.busy_ns - m.nic_before.engine.busy_ns;
    let delta = |f: fn(&nic_emu::counters::AppCounters) -> u64| {
        m.nic_after
            .app_sum(f)
            .saturating_sub(m.nic_before.app_sum(f)) as f64
            / u
    };
    Ok(TrialResult {
        app,
        interface: iface,
        stream,
        seconds: m.seconds,
        unit,
        units,
        rate: units as f64 / secs,
        packets,
        gbps: bytes as f64 * 8.0 / secs / 1e9,
        app_busy_ns_per_unit: m.busy.as_nanos() as f64 / u,
        app_busy_fraction: m.busy.as_secs_f64() / secs,
        nic_busy_ns_per_unit: nic_busy as f64 / u,
        rx_notifications_per_unit: delta(|c| c.rx_notifications),
        register_writes_per_unit: delta(|c| c.mmio_writes),
        app_dropped: dropped,
        nic_drops,
        latency: m.latency,
        load,
        busy_threads: threads,
        nic: m.nic_after,
    })
}

pub(super) fn client_load(what: &str, opts: &TrialOptions) -> String {
    match opts.client_core {
        Some(c) => format!("{what} on its own thread (core {c}), TX pipe on a cabled port"),
        None => format!(
            "{what} polled on the application's core between application polls, TX pipe on a cabled port \
             (the rate is a lower bound for the application alone)"
        ),
    }
}

/// Maglev and telemetry: the built-in generator, the same handler on
/// either driver.
pub(super) fn packet_app<H: enso::PacketHandler>(
    nic: &Nic,
    iface: Interface,
    pipes: u32,
    opts: &TrialOptions,
    h: &mut H,
    sink: bool,
) -> Result<Measured, TrialError> {
    let counts = |d: &dyn AppDriver<H>, _: &H| -> Counts {
        let s = d.stats();
        (s.frames, s.frames, s.bytes, s.dropped)
    };
    let m = match iface {
        Interface::Enso => {
            let mut d = EnsoDriver::new(Device::attach_nic(nic, app_options(iface, pipes, false))?);
            if sink {
                add_fallback_rx_pipes(&mut d, 0, pipes)?;
            } else {
                d.add_fallback_pipes_on(0, pipes)?;
            }
            wait_for_setup(nic, pipes as usize)?;
            measure_generator(nic, opts, &mut d, h, counts)?
        }
        Interface::Packetized => {
            let mut d = PacketizedDriver::new(
                Device::attach_nic(nic, app_options(iface, pipes, false))?,
                opts.burst,
            );
            d.add_rss_queues_on(0, pipes)?;
            wait_for_setup(nic, pipes as usize)?;
            measure_generator(nic, opts, &mut d, h, counts)?
        }
    };
    Ok(m)
}

pub(super) fn measure_generator<D: AppDriver<H>, H>(
    nic: &Nic,
    opts: &TrialOptions,
    d: &mut D,
    h: &mut H,
    counts: impl Fn(&dyn AppDriver<H>, &H) -> Counts,
) -> Result<Measured, TrialError> {
    nic.with_engine(|e| e.set_generators_paused(false));
    let load = Load {
        client: None,
        progress: None,
        warm: &mut || true,
    };
    let r = run_window(nic, opts, d, h, &counts, load);
    nic.with_engine(|e| e.set_generators_paused(true));
    r
}

/// The KV server under its load: the client, or the NIC's generator
/// replaying requests (`client` is `None`).
pub(super) fn measure_kv<D: AppDriver<KvServer>>(
    nic: &Nic,
    opts: &TrialOptions,
    d: &mut D,
    server: &mut KvServer,
    client: Option<KvLoadClient>,
) -> Result<Measured, TrialError> {
    let counts = |d: &dyn AppDriver<KvServer>, h: &KvServer| -> Counts {
        let s = d.stats();
        (h.stats().requests, s.frames, s.bytes, s.dropped)
    };
    let r = match client {
        Some(c) => measure(nic, opts, d, server, counts, c, None),
        None => measure_generator(nic, opts, d, server, counts),
    };
    if std::env::var_os("KV_DEBUG").is_some() {
        let s = d.stats();
        eprintln!(
            "frames {} batches {} per {:.1}",
            s.frames,
            s.batches,
            s.frames as f64 / s.batches.max(1) as f64
        );
    }
    r
}

/// The log monitor under its load: the client, or the NIC's generator
/// replaying the log (`client` is `None`).
pub(super) fn measure_log<D: AppDriver<H>, H>(
    nic: &Nic,
    opts: &TrialOptions,
    d: &mut D,
    h: &mut H,
    counts: impl Fn(&dyn AppDriver<H>, &H) -> Counts,
    client: Option<LogClient>,
    progress: Option<&AtomicU64>,
) -> Result<Measured, TrialError> {
    match client {
        Some(c) => measure(nic, opts, d, h, counts, c, progress),
        None => measure_generator(nic, opts, d, h, counts),
    }
}

/// Runs the application with its client (interleaved, or on the client's
/// core) through the warm-up and the measured window.
pub(super) fn measure<D: AppDriver<H>, H, C: Client>(
    nic: &Nic,
    opts: &TrialOptions,
    d: &mut D,
    h: &mut H,
    counts: impl Fn(&dyn AppDriver<H>, &H) -> Counts,
    mut client: C,
    progress: Option<&AtomicU64>,
) -> Result<Measured, TrialError> {
    let Some(core) = opts.client_core else {
        let load = Load {
            client: Some(&mut client),
            progress,
            warm: &mut || true,
        };
        return run_window(nic, opts, d, h, &counts, load);
    };
    // The client on its own thread: it runs until told to stop, and says
    // when its warm-up (the preload) is over.
    let stop = AtomicBool::new(false);
    let measuring = AtomicBool::new(false);
    let ready = AtomicBool::new(false);
    std::thread::scope(|s| {
        let t = std::thread::Builder::new()
            .name("client".into())
            .spawn_scoped(s, || -> Result<Option<LatencyStats>, LoadError> {
                enso_apps::cli::pin_current(core);
                let mut reset = false;
                while !stop.load(Ordering::Relaxed) {
                    client.poll()?;
                    if client.ready() {
                        ready.store(true, Ordering::Relaxed);
                    }
                    if !reset && measuring.load(Ordering::Relaxed) {
                        client.start_measuring();
                        reset = true;
                    }
                }
                Ok(client.latency())
            })
            .expect("spawn the client thread");
        let mut warm = || {
            let ok = ready.load(Ordering::Relaxed);
            if ok {
                measuring.store(true, Ordering::Relaxed);
            }
            ok
        };
        let load = Load {
            client: None,
            progress,
            warm: &mut warm,
        };
        let r = run_window(nic, opts, d, h, &counts, load);
        stop.store(true, Ordering::Relaxed);
        let lat = t.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        let mut m = r?;
        m.latency = lat;
        Ok(m)
    })
}

/// The load as the application's thread sees it.
pub(super) struct Load<'a> {
    /// A client to poll between application polls.
    pub(super) client: Option<&'a mut dyn Client>,
    /// Where to publish the packets handled (a sink's credit).
    pub(super) progress: Option<&'a AtomicU64>,
    /// Whether a client on its own thread has finished warming up.
    pub(super) warm: &'a mut dyn FnMut() -> bool,
}

/// Warm-up (at least `opts.warmup`, and until the load is ready), then the
/// measured window.
pub(super) fn run_window<D: AppDriver<H>, H>(
    nic: &Nic,
    opts: &TrialOptions,
    d: &mut D,
    h: &mut H,
    counts: &dyn Fn(&dyn AppDriver<H>, &H) -> Counts,
    load: Load<'_>,
) -> Result<Measured, TrialError> {
    let Load {
        mut client,
        progress,
        warm,
    } = load;
    // One round, then the application's progress for the client's credit.
    let round = |d: &mut D, h: &mut H, c: &mut Option<&mut dyn Client>, busy: &mut Duration| {
        step(d, h, c, busy)?;
        if let Some(p) = progress {
            p.store(counts(&*d, h).1, Ordering::Relaxed);
        }
        Ok::<(), TrialError>(())
    };
    let mut busy = Duration::ZERO;
    let t0 = Instant::now();
    loop {
        round(d, h, &mut client, &mut busy)?;
        let client_ready = client.as_ref().is_none_or(|c| c.ready());
        if t0.elapsed() >= opts.warmup && client_ready && warm() {
            break;
        }
        if t0.elapsed() > opts.warmup + Duration::from_secs(60) {
            return Err(TrialError::Config(
                "the load did not get ready within a minute (KV preload too large?)".into(),
            ));
        }
    }
    if let Some(c) = client.as_mut() {
        c.start_measuring();
    }
    let nic_before = nic.stats();
    let c0 = counts(&*d, h);
    busy = Duration::ZERO;
    let start = Instant::now();
    while start.elapsed() < opts.duration {
        round(d, h, &mut client, &mut busy)?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let c1 = counts(&*d, h);
    let nic_after = nic.stats();
    Ok(Measured {
        seconds,
        counts: (c1.0 - c0.0, c1.1 - c0.1, c1.2 - c0.2, c1.3 - c0.3),
        busy,
        nic_before,
        nic_after,
        latency: client.as_ref().and_then(|c| c.latency()),
    })
}

/// One round: 16 application polls (timed if they found work), then one
/// client poll.
#[inline]
pub(super) fn step<D: AppDriver<H>, H>(
    d: &mut D,
    h: &mut H,
    client: &mut Option<&mut dyn Client>,
    busy: &mut Duration,
) -> Result<(), TrialError> {
    let t = Instant::now();
    let mut n = 0;
    for _ in 0..16 {
        n += d.poll(h)?;
    }
    if n > 0 {
        *busy += t.elapsed();
    }
    if let Some(c) = client.as_mut() {
        c.poll()?;
    }
    Ok(())
}
