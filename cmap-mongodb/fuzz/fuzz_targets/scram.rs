//! The SCRAM client (nonce `fuzz`) against arbitrary server-first and
//! server-final messages: the input's first byte picks SCRAM-SHA-1 or
//! SCRAM-SHA-256, the rest is the server-first message, then a NUL, then
//! the server-final one. Each input ends in success or a typed
//! `ScramError`; iteration counts are bounded, so none runs long.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let (server_first, server_final) = match rest.iter().position(|&b| b == 0) {
        Some(nul) => (&rest[..nul], &rest[nul + 1..]),
        None => (rest, &[][..]),
    };
    if let Err(e) = cmap_mongodb::fuzzing::scram(first & 1 == 1, server_first, server_final) {
        let _ = e.to_string();
    }
});
