//! `/stall/{ms}` freezes new arrivals for a known time, the device behind coordinated-omission
//! tests.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{start_default, Client};
use horde_target::{Capacity, ServiceTimes, TargetConfig, TargetHandle};

const MS: Duration = Duration::from_millis(1);

#[test]
fn arrivals_during_a_stall_wait_for_its_end_and_later_ones_do_not() {
    let target = start_default();
    let mut control = Client::connect(target.local_addr());
    let mut client = Client::connect(target.local_addr());
    client.get("/"); // connection set up outside the timed requests

    let (response, stall_took) = control.timed_get("/stall/300");
    assert_eq!(response.status, 200);
    assert!(stall_took < 100 * MS, "the stall request itself took {stall_took:?}");

    let (response, elapsed) = client.timed_get("/");
    assert_eq!(response.status, 200);
    assert!(elapsed >= 280 * MS, "a request during the stall took only {elapsed:?}");
    assert!(elapsed < 1000 * MS, "a request during the stall took {elapsed:?}");

    // The stall is over now.
    let (response, elapsed) = client.timed_get("/");
    assert_eq!(response.status, 200);
    assert!(elapsed < 50 * MS, "a request after the stall took {elapsed:?}");
}

#[test]
fn stall_holds_the_stalling_connection_too() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    client.get("/stall/200");
    let (_, elapsed) = client.timed_get("/");
    assert!(elapsed >= 180 * MS, "took {elapsed:?}");
}

#[test]
fn requests_in_service_are_not_affected() {
    let target = start_default();
    let address = target.local_addr();
    let mut control = Client::connect(address);
    let mut client = Client::connect(address);
    client.get("/");
    let in_service = thread::spawn(move || client.timed_get("/delay/150").1);
    thread::sleep(40 * MS);
    control.get("/stall/600");
    let elapsed = in_service.join().expect("client thread");
    assert!(elapsed >= 150 * MS, "took {elapsed:?}");
    assert!(elapsed < 450 * MS, "a request already in service was stalled: {elapsed:?}");
}

#[test]
fn later_stall_extends_and_shorter_stall_does_not_shorten() {
    let target = start_default();
    let mut control = Client::connect(target.local_addr());
    let mut client = Client::connect(target.local_addr());
    client.get("/");
    let started = Instant::now();
    control.get("/stall/100");
    control.get("/stall/400"); // extends: stall control is never held by a stall
    control.get("/stall/50"); // ends earlier: changes nothing
    client.get("/");
    let elapsed = started.elapsed();
    assert!(elapsed >= 390 * MS, "took {elapsed:?}");
    assert!(elapsed < 1200 * MS, "took {elapsed:?}");
}

#[test]
fn delay_counts_from_the_stall_end() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    let started = Instant::now();
    client.get("/stall/200");
    client.get("/delay/100");
    let elapsed = started.elapsed();
    assert!(elapsed >= 300 * MS, "took {elapsed:?}");
    assert!(elapsed < 900 * MS, "took {elapsed:?}");
}

#[test]
fn stalled_requests_then_queue_for_capacity() {
    // One worker of 50 ms: four requests released together by the stall's end finish 50 ms
    // apart, the last about 200 ms after the stall ends.
    let target = TargetHandle::start(TargetConfig {
        capacity: Some(Capacity { workers: 1, service_ms: 50.0, service_times: ServiceTimes::Fixed }),
        ..TargetConfig::default()
    })
    .expect("target starts");
    let address = target.local_addr();
    let mut control = Client::connect(address);
    let mut clients: Vec<Client> = (0..4).map(|_| Client::connect(address)).collect();
    for client in &mut clients {
        client.get("/");
    }
    thread::sleep(100 * MS); // let the worker's queue drain
    let started = Instant::now();
    let (_, stall_took) = control.timed_get("/stall/200");
    assert!(stall_took < 40 * MS, "stall control must skip the capacity queue: {stall_took:?}");
    let threads: Vec<_> = clients.into_iter().map(|mut client| thread::spawn(move || client.get("/").status)).collect();
    for thread in threads {
        assert_eq!(thread.join().expect("client thread"), 200);
    }
    let elapsed = started.elapsed();
    assert!(elapsed >= 390 * MS, "took {elapsed:?}");
    assert!(elapsed < 1200 * MS, "took {elapsed:?}");
}
