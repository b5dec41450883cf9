//! `/delay/{ms}` takes the time it says.

mod common;

use std::time::Duration;

use common::{median, start_default, Client};

#[test]
fn delay_50_takes_between_50_and_70_ms() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    client.get("/"); // connection set up outside the timed requests
    let mut durations = Vec::new();
    for _ in 0..5 {
        let (response, elapsed) = client.timed_get("/delay/50");
        assert_eq!(response.status, 200);
        // Never early: the delay is measured from arrival, which is after the request left.
        assert!(elapsed >= Duration::from_millis(50), "took {elapsed:?}");
        durations.push(elapsed);
    }
    let median = median(durations);
    assert!(median <= Duration::from_millis(70), "median {median:?}");
}

#[test]
fn decimal_delay_is_honoured() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    let (response, elapsed) = client.timed_get("/delay/30.5");
    assert_eq!(response.status, 200);
    assert!(elapsed >= Duration::from_micros(30_500), "took {elapsed:?}");
    assert!(elapsed < Duration::from_millis(200), "took {elapsed:?}");
}

#[test]
fn delays_run_concurrently() {
    let target = start_default();
    let address = target.local_addr();
    let started = std::time::Instant::now();
    let threads: Vec<_> =
        (0..8).map(|_| std::thread::spawn(move || Client::connect(address).get("/delay/200").status)).collect();
    for thread in threads {
        assert_eq!(thread.join().expect("client thread"), 200);
    }
    let elapsed = started.elapsed();
    // Eight 200 ms delays served one after another would take 1.6 s.
    assert!(elapsed < Duration::from_millis(800), "took {elapsed:?}");
}
