//! `bench latency`'s lowest load: the NIC and the echo server park between
//! frames, are woken for each, and every frame still comes back.

use std::time::Duration;

use bench::latency::{wake_cost, LatencyPlan};
use bench::placement::Placement;
use bench::progress::Progress;

#[test]
fn at_the_lowest_load_both_sides_park_and_every_frame_comes_back() {
    let mut plan = LatencyPlan::new(400);
    plan.warmup = Duration::from_millis(20);
    // 500 frames a second: 2 ms between frames, four times the park
    // threshold, so the parking side sleeps before every frame.
    let (rate, trial) = (500.0, Duration::from_millis(300));
    let mut progress = Progress::new("wake", 2, true);
    let w = wake_cost(&plan, &Placement::pick(), rate, 1, trial, &mut progress)
        .expect("the wake measurement runs");
    eprintln!("{}", w.text());
    assert_eq!(w.rounds.len(), 1);
    let r = &w.rounds[0];
    // About 150 frames a trial (300 ms at 500/s); a loaded machine
    // stretches the window, never by 4x.
    for (mode, (p50, p99, n)) in [("spin", r.spin), ("park", r.park)] {
        assert!((75..=600).contains(&n), "{mode}: {n} round trips timed");
        assert!(0 < p50 && p50 <= p99, "{mode}: p50 {p50} ns, p99 {p99} ns");
    }
    assert_eq!(w.lost, 0, "every frame came back ({} sent)", w.sent);
    assert!((150..=1200).contains(&w.sent), "{} frames sent", w.sent);
    // The engine slept between frames, and the application's doorbells or
    // the generator's schedule ended its sleeps.
    assert!(
        w.engine_parks >= 20 && w.engine_parks <= 10 * w.sent,
        "the engine parked {} times for {} frames",
        w.engine_parks,
        w.sent
    );
    assert_eq!(w.added_p99_ns, r.park.1 as i64 - r.spin.1 as i64);
}
