//! A server's reply to a command, as bytes: the header (length against
//! `maxMessageSizeBytes`, `responseTo`, an opcode other than OP_MSG such
//! as OP_COMPRESSED refused), the flags, the sections and their BSON
//! documents, then the reply's `ok`, code and labels. The first byte
//! says whether `responseTo` names the request. Each input ends in a
//! reply or a typed error; the run's malloc limit (64 MB, over the
//! 48 MB `maxMessageSizeBytes`) catches any larger allocation.
#![no_main]

use cmap_mongodb::Error;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&first, reply)) = data.split_first() else {
        return;
    };
    match cmap_mongodb::fuzzing::reply(reply, first & 1 == 1) {
        Ok(_) | Err(Error::Command(_) | Error::Protocol(_) | Error::Network { .. }) => {}
        Err(other) => panic!("an error a reply cannot give: {other:?}"),
    }
});
