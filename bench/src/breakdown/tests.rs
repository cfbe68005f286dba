use super::*;

/// (function, file, part): names as cachegrind prints them for the
/// release build of `bench breakdown-worker`.
const CASES: &[(&str, &str, Part)] = &[
    // The engine, whatever it inlined.
    (
        "nic_emu::engine::step::<impl nic_emu::engine::Engine>::step",
        "/w/nic-emu/src/engine/step.rs",
        Part::Engine,
    ),
    (
        "pcie_model::link::Link::transfer",
        "/w/pcie-model/src/link.rs",
        Part::Engine,
    ),
    (
        "bench::breakdown::engine_phase",
        "/w/bench/src/breakdown.rs",
        Part::Engine,
    ),
    // Neither side.
    ("__memcpy_avx_unaligned_erms", "???", Part::Other),
    (
        "enso_abi::wire::classify_full",
        "/w/enso-abi/src/wire.rs",
        Part::Other,
    ),
    // Receive: the library's RX path and the drivers' loops.
    (
        "enso::packetized::<impl enso::device::Device>::rx_burst",
        "/w/enso-lib/src/packetized.rs",
        Part::Receive,
    ),
    (
        "enso::packetized::<impl enso::device::Device>::refill",
        "/w/enso-lib/src/packetized.rs",
        Part::Receive,
    ),
    (
        "enso::device::notify::<impl enso::device::Device>::next_pipe",
        "/w/enso-lib/src/device/notify.rs",
        Part::Receive,
    ),
    (
        "enso::app::EnsoDriver::poll",
        "/w/enso-lib/src/app.rs",
        Part::Receive,
    ),
    (
        "enso_apps::nic::EnsoReplyDriver::poll",
        "/w/apps/src/nic.rs",
        Part::Receive,
    ),
    (
        "bench::breakdown::app_phase",
        "/w/bench/src/breakdown.rs",
        Part::Receive,
    ),
    // Send: the library's TX path.
    (
        "enso::packetized::<impl enso::device::Device>::tx_burst",
        "/w/enso-lib/src/packetized.rs",
        Part::Send,
    ),
    (
        "enso::packetized::<impl enso::device::Device>::tx_reclaim_all",
        "/w/enso-lib/src/packetized.rs",
        Part::Send,
    ),
    (
        "enso::app::EnsoDriver::poll",
        "/w/enso-lib/src/device/tx.rs",
        Part::Send,
    ),
    // The application, inlined into a driver's loop or on its own.
    (
        "enso::app::PacketizedDriver::poll",
        "/w/apps/src/maglev.rs",
        Part::Application,
    ),
    (
        "enso::app::EnsoDriver::poll",
        "/w/apps/src/telemetry.rs",
        Part::Application,
    ),
    (
        "enso_apps::kv::KvServer::try_handle",
        "/w/apps/src/kv/store.rs",
        Part::Application,
    ),
    (
        "enso_apps::logmon::LogMonitor::process",
        "???",
        Part::Application,
    ),
    (
        "<aho_corasick::packed::teddy::builder::x86_64::SlimAVX2<4_usize> as aho_corasick::packed::teddy::builder::SearcherT>::find",
        "/r/aho-corasick-1.1.5/src/packed/teddy/generic.rs",
        Part::Application,
    ),
    (
        "regex_automata::dfa::search::find_fwd",
        "/r/regex-automata-0.4.18/src/dfa/search.rs",
        Part::Application,
    ),
    (
        "_int_malloc",
        "./malloc/./malloc/malloc.c",
        Part::Other,
    ),
    // Responses and rewritten frames.
    (
        "enso_apps::kv::KvServer::try_handle",
        "/w/apps/src/kv/wire.rs",
        Part::Response,
    ),
    (
        "enso_apps::maglev::Maglev::process",
        "/w/apps/src/packet/mod.rs",
        Part::Response,
    ),
    (
        "enso::app::EnsoDriver::poll",
        "/w/apps/src/echo.rs",
        Part::Response,
    ),
    (
        "enso_apps::packet::finish_udp_frame",
        "/w/apps/src/packet/mod.rs",
        Part::Response,
    ),
    (
        "<enso_apps::kv::KvServer as enso_apps::nic::ReplyHandler>::prefetch_more",
        "/w/apps/src/nic.rs",
        Part::Application,
    ),
    (
        "<enso_apps::nic::EnsoReplyDriver as enso_apps::nic::AppDriver<H>>::poll",
        "/w/apps/src/nic.rs",
        Part::Receive,
    ),
    (
        "enso::device::tx::<impl enso::device::Device>::reap_completions",
        "/w/enso-lib/src/device/tx.rs",
        Part::Send,
    ),
    (
        "enso_apps::packet::UdpDatagram::parse",
        "/w/apps/src/packet/mod.rs",
        Part::Application,
    ),
    // Header views in a sink are the application's.
    (
        "<enso_apps::telemetry::Telemetry as enso::app::PacketHandler>::handle",
        "/w/apps/src/packet/mod.rs",
        Part::Application,
    ),
];

#[test]
fn real_symbol_names_go_where_the_rules_say() {
    for &(function, file, part) in CASES {
        assert_eq!(classify(function, file), part, "{function} in {file}");
    }
}

#[test]
fn only_the_four_application_parts_are_the_application_side() {
    let app: Vec<Part> = Part::ALL.into_iter().filter(|p| p.is_app_side()).collect();
    assert_eq!(
        app,
        [Part::Receive, Part::Application, Part::Response, Part::Send]
    );
}

const SMALL: &str = "\
events: Ir
fl=/w/enso-lib/src/packetized.rs
fn=enso::packetized::<impl enso::device::Device>::rx_burst
1 1000
fl=/w/apps/src/maglev.rs
fn=enso::app::PacketizedDriver::poll
1 2000
fl=/w/nic-emu/src/engine/step.rs
fn=nic_emu::engine::Engine::step
1 5000
fl=???
fn=memcpy
1 100
";

const LARGE: &str = "\
events: Ir
fl=/w/enso-lib/src/packetized.rs
fn=enso::packetized::<impl enso::device::Device>::rx_burst
1 3000
fn=enso::packetized::<impl enso::device::Device>::tx_burst
1 500
fl=/w/apps/src/maglev.rs
fn=enso::app::PacketizedDriver::poll
1 6000
fl=/w/apps/src/packet/mod.rs
fn=enso_apps::maglev::Maglev::process
1 800
fl=/w/nic-emu/src/engine/step.rs
fn=nic_emu::engine::Engine::step
1 9000
fl=???
fn=memcpy
1 300
";

#[test]
fn the_difference_of_two_runs_is_split_per_unit() {
    let run = |units, text| {
        (
            WorkerOutput {
                units,
                frames: units,
                drops: 0,
            },
            crate::cache::parse_profile(text).unwrap(),
        )
    };
    let b = difference(
        App::Maglev,
        Interface::Packetized,
        &run(100, SMALL),
        &run(300, LARGE),
    )
    .unwrap();
    assert_eq!(b.units, 200);
    assert_eq!(b.part(Part::Receive), 10.0);
    assert_eq!(b.part(Part::Application), 20.0);
    assert_eq!(b.part(Part::Response), 4.0);
    assert_eq!(b.part(Part::Send), 2.5);
    assert_eq!(b.part(Part::Engine), 20.0);
    assert_eq!(b.part(Part::Other), 1.0);
    assert_eq!(b.app_total, 36.5);
    assert_eq!(b.total, 57.5);
    assert_eq!(b.top_functions[0].0, "enso::app::PacketizedDriver::poll");
    assert_eq!(b.top_functions[0].1, Part::Application);
    let t = table(&[b]);
    assert!(
        t.contains("| maglev | packetized | packet | 10.0 | 20.0 | 4.0 | 2.5 | 36.5 |"),
        "{t}"
    );
    assert!(difference(App::Maglev, Interface::Enso, &run(3, SMALL), &run(3, LARGE)).is_err());
}
