// SPDX-License-Identifier: GPL-2.0

//! A bounded fuzz run of every target in `fuzz/targets.rs`, as part of
//! `cargo test` (`make host-test`): each target first runs its checked-in
//! corpus (`fuzz/corpus/TARGET/`, which also holds the inputs of bugs found
//! so far), then mutants for `FUZZ_TEST_SECONDS` (default 1.5) seconds.
//! `make fuzz` runs the same targets for longer, with edge coverage.

#[path = "../fuzz/engine.rs"]
mod engine;
#[path = "../fuzz/targets.rs"]
mod targets;

use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn run(name: &str) {
    let &(name, target, max_len) = targets::TARGETS
        .iter()
        .find(|t| t.0 == name)
        .expect("a target of that name");
    let seeds = engine::load_dir(&corpus_dir(name));
    assert!(!seeds.is_empty(), "{name} has no corpus");
    // A new seed each run explores further over many runs; it is printed
    // with any failure, together with the input itself.
    let seed = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
    let budget = engine::seconds_from_env("FUZZ_TEST_SECONDS", 1.5);
    let mut fuzzer = engine::Fuzzer::new(name, target, max_len, seed, seeds, None);
    let outcome = fuzzer.run_until(Instant::now() + budget);
    if let Some((input, message)) = outcome.failure {
        panic!(
            "fuzz target {name} failed (FUZZ_SEED={seed}, after {} runs): {message}\ninput ({} bytes): {}",
            outcome.executions,
            input.len(),
            engine::to_hex(&input)
        );
    }
}

macro_rules! fuzz_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                run(stringify!($name));
            }
        )*

        #[test]
        fn every_target_has_a_test_and_a_corpus() {
            let tested = [$(stringify!($name)),*];
            for (name, _, _) in targets::TARGETS {
                assert!(tested.contains(name), "no test for {name}");
                assert!(corpus_dir(name).is_dir(), "no corpus for {name}");
            }
        }
    };
}

fuzz_tests!(
    connect,
    fdb,
    headers,
    headers_roundtrip,
    rx,
    grh,
    scalars,
    ring,
    wr,
    fifo,
    cq_event,
    outbox,
    lan_datagram,
    lan_reassembly,
    steer,
);
