//! Connection strings, as users write them: `ConnectionString::parse`,
//! everything a parsed string answers (its `Debug`, hosts, user, database,
//! options, unknown options with their suggestions), and its pool options
//! set on a builder (`apply_to`, strict and not) and built. Each input
//! ends in options or a typed error with a message.
#![no_main]

use cmap_core::{ConnectionString, PoolOptions};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(uri) = std::str::from_utf8(data) else {
        return;
    };
    let cs = match ConnectionString::parse(uri) {
        Ok(cs) => cs,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let _ = format!("{cs:?}");
    let _ = (cs.hosts(), cs.srv_name(), cs.database());
    if let Some(user) = cs.user_info() {
        let _ = (user.username(), user.password(), format!("{user:?}"));
    }
    for (name, value) in cs.driver_options() {
        assert!(cs.driver_option(name).is_some(), "{name}={value}");
    }
    for unknown in cs.unknown_options() {
        let _ = (
            unknown.to_string(),
            unknown.suggestion(),
            unknown.to_error().to_string(),
        );
    }
    for strict in [false, true] {
        let mut builder = PoolOptions::builder();
        match cs.apply_to(&mut builder, strict).map(|()| builder.build()) {
            Ok(Ok(options)) => {
                let _ = format!("{options:?}");
            }
            Ok(Err(e)) | Err(e) => {
                let _ = e.to_string();
            }
        }
    }
});
