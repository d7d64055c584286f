//! Random command sequences and virtual time against the core: its
//! invariants after every input, the driver's own books against the
//! core's counts, and a replay of the same sequence giving the same
//! outputs (`cmap_core::testing::run`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Some(case) = cmap_core_fuzz::case_from_bytes(data) {
        cmap_core_fuzz::run(&case);
    }
});
