// SPDX-License-Identifier: GPL-2.0

//! A small mutation fuzzer for the pure logic, on the stable toolchain.
//!
//! Each target is a function over bytes that checks its properties with
//! `assert!` (a panic is a failure, whether from the property or from the
//! code under test). The engine starts from a corpus of seed inputs, mutates
//! them with a seeded xorshift PRNG (byte flips, interesting values, inserts,
//! deletes, splices), and keeps a mutant when it shows something new:
//!
//! - features the target reports with [`hit`] (which opcode, which error,
//!   which step of a state machine), always on; and
//! - edge counters of SanitizerCoverage, when the crate is built with
//!   `-Cpasses=sancov-module` and inline 8-bit counters (`make fuzz` does):
//!   LLVM's instrumentation hands us its counter arrays through
//!   `__sanitizer_cov_8bit_counters_init`, which we define here, so no
//!   libFuzzer (nor nightly) is needed.

// Shared by the bounded test and the long-running example; each uses part.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::HashSet;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A fuzz target: checks its properties on one input, panics on failure.
pub type Target = fn(&[u8]);

/// xorshift64*: deterministic for a given seed, good enough to mutate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x9e37_79b9_7f4a_7c15 | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 for `n` 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

/// Reads typed values from fuzz input; past the end it reads zeros, so any
/// input drives a structured target.
pub struct Input<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Input<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.at >= self.bytes.len()
    }

    pub fn u8(&mut self) -> u8 {
        let b = self.bytes.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    pub fn bool(&mut self) -> bool {
        self.u8() & 1 != 0
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    pub fn u64(&mut self) -> u64 {
        (u64::from(self.u32()) << 32) | u64::from(self.u32())
    }

    /// Up to `n` bytes, fewer at the end of the input.
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let start = self.at.min(self.bytes.len());
        let end = self.at.saturating_add(n).min(self.bytes.len());
        self.at = self.at.saturating_add(n);
        &self.bytes[start..end]
    }

    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        let start = self.at.min(self.bytes.len());
        self.at = self.bytes.len();
        &self.bytes[start..]
    }
}

thread_local! {
    static FEATURES: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Reports that this input reached `feature` (a small tag and a value; the
/// engine keeps inputs that reach new ones).
pub fn hit(tag: u32, value: u64) {
    FEATURES.with(|f| {
        f.borrow_mut()
            .push((u64::from(tag) << 48) ^ value.wrapping_mul(0x9e37_79b9))
    });
}

/// SanitizerCoverage's counter arrays, one per instrumented object.
const MAX_MODULES: usize = 256;
static MODULES: AtomicUsize = AtomicUsize::new(0);
static STARTS: [AtomicUsize; MAX_MODULES] = [const { AtomicUsize::new(0) }; MAX_MODULES];
static ENDS: [AtomicUsize; MAX_MODULES] = [const { AtomicUsize::new(0) }; MAX_MODULES];

/// Called by the constructors SanitizerCoverage puts in every instrumented
/// object, before `main`.
#[no_mangle]
pub extern "C" fn __sanitizer_cov_8bit_counters_init(start: *mut u8, end: *mut u8) {
    let i = MODULES.fetch_add(1, Ordering::SeqCst);
    if let (Some(s), Some(e)) = (STARTS.get(i), ENDS.get(i)) {
        s.store(start as usize, Ordering::SeqCst);
        e.store(end as usize, Ordering::SeqCst);
    }
}

/// The PC table, if `-sanitizer-coverage-pc-table` is on; unused.
#[no_mangle]
pub extern "C" fn __sanitizer_cov_pcs_init(_start: *const usize, _end: *const usize) {}

/// The instrumented counter arrays, as (start, length), if the build has
/// them. They are written by instrumented code behind Rust's back, so they
/// are only ever touched through raw pointers, between runs of a target.
fn counters() -> Vec<(*mut u8, usize)> {
    let n = MODULES.load(Ordering::SeqCst).min(MAX_MODULES);
    (0..n)
        .filter_map(|i| {
            let start = STARTS[i].load(Ordering::SeqCst);
            let end = ENDS[i].load(Ordering::SeqCst);
            (end > start).then_some((start as *mut u8, end - start))
        })
        .collect()
}

/// Zeroes the counters.
fn clear_counters(edges: &[(*mut u8, usize)]) {
    for &(start, len) in edges {
        // SAFETY: LLVM's constructor passed the bounds of a counter array
        // that lives as long as the program; no instrumented code runs
        // meanwhile on this thread, and `make fuzz` fuzzes on one thread.
        unsafe { std::ptr::write_bytes(start, 0, len) };
    }
}

/// Counter `i` of an array.
fn counter(start: *mut u8, i: usize) -> u8 {
    // SAFETY: as in `clear_counters`, and `i` is below the array's length.
    unsafe { std::ptr::read_volatile(start.add(i)) }
}

/// Whether edge coverage is compiled in.
pub fn has_edge_coverage() -> bool {
    MODULES.load(Ordering::SeqCst) > 0
}

/// libFuzzer's bucketing of hit counts: a loop taken 5 or 6 times is the
/// same behaviour, 1 or 2 times is not.
fn bucket(count: u8) -> u64 {
    match count {
        0 => 0,
        1 => 1,
        2 => 2,
        3 => 3,
        4..=7 => 4,
        8..=15 => 5,
        16..=31 => 6,
        32..=127 => 7,
        _ => 8,
    }
}

/// Hex, for corpus files and reports.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes of a hex corpus file (whitespace and `#` comment lines ignored).
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    let digits: Vec<u8> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.bytes())
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).ok()?, 16).ok())
        .collect()
}

/// The inputs of `dir` (`*.hex` files, or raw bytes otherwise), sorted by
/// name so that a run is reproducible.
pub fn load_dir(dir: &Path) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
    paths.sort();
    paths.iter().filter_map(|p| load_file(p)).collect()
}

pub fn load_file(path: &Path) -> Option<Vec<u8>> {
    let data = std::fs::read(path).ok()?;
    if path.extension().is_some_and(|e| e == "hex") {
        from_hex(std::str::from_utf8(&data).ok()?)
    } else {
        Some(data)
    }
}

/// A short stable name for an input (FNV-1a).
pub fn name_of(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    format!("{h:016x}")
}

const INTERESTING: [u64; 16] = [
    0,
    1,
    2,
    3,
    4,
    0x7f,
    0x80,
    0xff,
    0x100,
    0x7fff,
    0x8000,
    0xffff,
    0x00ff_ffff,
    0x0100_0000,
    0x7fff_ffff,
    0xffff_ffff,
];

/// A mutant of `base`, at most `max_len` bytes, maybe spliced with `other`.
pub fn mutate(rng: &mut Rng, base: &[u8], other: &[u8], max_len: usize) -> Vec<u8> {
    let mut out = base.to_vec();
    let rounds = 1 + rng.below(4) + if rng.chance(8) { rng.below(16) } else { 0 };
    for _ in 0..rounds {
        let len = out.len();
        match rng.below(12) {
            0 | 1 if len > 0 => {
                let at = rng.below(len);
                out[at] ^= 1 << rng.below(8);
            }
            2 if len > 0 => {
                let at = rng.below(len);
                out[at] = rng.next() as u8;
            }
            3 if len > 0 => {
                // An interesting value, 1, 2 or 4 bytes, either order.
                let width = [1usize, 2, 4][rng.below(3)].min(len);
                let at = rng.below(len - width + 1);
                let v = INTERESTING[rng.below(INTERESTING.len())];
                let be = v.to_be_bytes();
                let mut b = be[8 - width..].to_vec();
                if rng.chance(2) {
                    b.reverse();
                }
                out[at..at + width].copy_from_slice(&b);
            }
            4 if len > 0 => {
                let at = rng.below(len);
                let delta = 1 + rng.below(16) as u8;
                out[at] = if rng.chance(2) {
                    out[at].wrapping_add(delta)
                } else {
                    out[at].wrapping_sub(delta)
                };
            }
            5 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(8);
                let fill = rng.next() as u8;
                let random = rng.chance(2);
                for i in 0..n {
                    let b = if random { rng.next() as u8 } else { fill };
                    out.insert(at + i, b);
                }
            }
            6 if len > 0 => {
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(16));
                out.drain(at..at + n);
            }
            7 if len > 0 => {
                // Duplicate a piece in place.
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(32));
                let piece = out[at..at + n].to_vec();
                let to = rng.below(out.len() + 1);
                out.splice(to..to, piece);
            }
            8 if !other.is_empty() => {
                // Splice: our head, the other's tail.
                let cut = rng.below(len + 1);
                let from = rng.below(other.len());
                out.truncate(cut);
                out.extend_from_slice(&other[from..]);
            }
            9 if !other.is_empty() && len > 0 => {
                // Overwrite with a piece of the other input.
                let from = rng.below(other.len());
                let n = 1 + rng.below((other.len() - from).min(32));
                let at = rng.below(len);
                let n = n.min(len - at);
                out[at..at + n].copy_from_slice(&other[from..from + n]);
            }
            10 if len > 0 => out.truncate(rng.below(len)),
            _ => {
                let n = 1 + rng.below(4);
                for _ in 0..n {
                    out.push(rng.next() as u8);
                }
            }
        }
    }
    out.truncate(max_len);
    out
}

/// What a fuzz run found.
pub struct Outcome {
    pub executions: u64,
    pub corpus: usize,
    pub features: usize,
    /// The input that failed and the panic's message.
    pub failure: Option<(Vec<u8>, String)>,
}

/// Runs `target` on `input`; the panic message if it panicked.
pub fn run_one(target: Target, input: &[u8]) -> Result<(), String> {
    panic::catch_unwind(AssertUnwindSafe(|| target(input))).map_err(|e| {
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panic".into())
    })
}

/// One target's fuzzing state; [`Fuzzer::step`] runs a batch.
pub struct Fuzzer {
    pub name: &'static str,
    target: Target,
    max_len: usize,
    rng: Rng,
    pub corpus: Vec<Vec<u8>>,
    seen: HashSet<u64>,
    /// Where new corpus entries are written, if anywhere.
    save_to: Option<PathBuf>,
    pub executions: u64,
    pub failure: Option<(Vec<u8>, String)>,
}

impl Fuzzer {
    pub fn new(
        name: &'static str,
        target: Target,
        max_len: usize,
        seed: u64,
        seeds: Vec<Vec<u8>>,
        save_to: Option<PathBuf>,
    ) -> Self {
        let mut f = Self {
            name,
            target,
            max_len,
            rng: Rng::new(seed ^ hash_str(name)),
            corpus: Vec::new(),
            seen: HashSet::new(),
            save_to,
            executions: 0,
            failure: None,
        };
        // The empty input, then every seed, whether new or not (seeds are
        // curated: each stays a parent).
        f.execute(Vec::new(), true);
        for s in seeds {
            if f.failure.is_some() {
                break;
            }
            f.execute(s, true);
        }
        f
    }

    pub fn features(&self) -> usize {
        self.seen.len()
    }

    /// Runs one input; keeps it if it shows new features (or `keep`).
    fn execute(&mut self, input: Vec<u8>, keep: bool) {
        FEATURES.with(|f| f.borrow_mut().clear());
        let edges = counters();
        clear_counters(&edges);
        let result = run_one(self.target, &input);
        self.executions += 1;
        if let Err(message) = result {
            self.failure = Some((input, message));
            return;
        }
        let mut new = false;
        FEATURES.with(|f| {
            for feature in f.borrow_mut().drain(..) {
                new |= self.seen.insert(feature);
            }
        });
        for (m, &(start, len)) in edges.iter().enumerate() {
            for i in 0..len {
                let count = counter(start, i);
                if count != 0 {
                    let feature =
                        (1u64 << 63) | ((m as u64) << 40) | ((i as u64) << 4) | bucket(count);
                    new |= self.seen.insert(feature);
                }
            }
        }
        if new || keep {
            if new && !keep {
                if let Some(dir) = &self.save_to {
                    let _ = std::fs::create_dir_all(dir);
                    let path = dir.join(format!("{}.hex", name_of(&input)));
                    let _ = std::fs::write(path, to_hex(&input) + "\n");
                }
            }
            self.corpus.push(input);
        }
    }

    /// `n` mutants; stops at the first failure.
    pub fn step(&mut self, n: usize) {
        for _ in 0..n {
            if self.failure.is_some() {
                return;
            }
            // Newer entries found new things: favour them a little.
            let len = self.corpus.len();
            let pick = if self.rng.chance(2) {
                len - 1 - self.rng.below(len.min(8))
            } else {
                self.rng.below(len)
            };
            let other = self.rng.below(len);
            let input = mutate(
                &mut self.rng,
                &self.corpus[pick],
                &self.corpus[other],
                self.max_len,
            );
            self.execute(input, false);
        }
    }

    /// Fuzzes until `deadline` or a failure.
    pub fn run_until(&mut self, deadline: Instant) -> Outcome {
        while self.failure.is_none() && Instant::now() < deadline {
            self.step(64);
        }
        Outcome {
            executions: self.executions,
            corpus: self.corpus.len(),
            features: self.seen.len(),
            failure: self.failure.clone(),
        }
    }
}

fn hash_str(s: &str) -> u64 {
    u64::from_str_radix(&name_of(s.as_bytes()), 16).unwrap_or(0)
}

/// The duration in `var` (seconds, fractions allowed), or `default`.
pub fn seconds_from_env(var: &str, default: f64) -> Duration {
    let s = std::env::var(var)
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(default);
    Duration::from_secs_f64(s)
}
