//! Entry points for the fuzz targets of `cmap-mongodb/fuzz` (feature
//! `fuzzing`): the parsers of what a server sends, driven as a connection
//! drives them. Not a stable API.

use std::future::Future;
use std::io;

use bson::{doc, Document};
use cmap_core::Address;

use crate::connection::{Connection, ServerInfo};
use crate::error::Error;
use crate::scram::{Mechanism, ScramClient, ScramError};
use crate::transport::{poll_once, sealed, Transport};

/// The `maxMessageSizeBytes` the server of [`reply`] announces: the
/// largest body a reply may have, and so the most a reply may make the
/// client allocate (the fuzz runs with a malloc limit above it).
pub const MAX_MESSAGE_SIZE: usize = crate::wire::DEFAULT_MAX_MESSAGE_SIZE;

/// Runs a `ping` on a connection whose server answers with `data`, as
/// the bytes of its reply (header included). With `answer_this_request`,
/// bytes 8 to 12 (`responseTo`) are set to the request's id, so that the
/// rest of the reply is read. Returns what `run_command` returns.
pub fn reply(data: &[u8], answer_this_request: bool) -> Result<Document, Error> {
    let replay = Replay {
        data: data.to_vec(),
        answer_this_request,
    };
    let mut conn = Connection::new(replay, Address::new("fuzz", 27017));
    conn.set_server(ServerInfo::from_hello(
        &doc! { "maxMessageSizeBytes": MAX_MESSAGE_SIZE as i64 },
    ));
    poll_once(conn.run_command("admin", &doc! { "ping": 1 })).expect("in-memory I/O is ready at once")
}

/// A SCRAM conversation (client nonce `fuzz`, user `u`, password `p`)
/// fed `server_first`, then, if that was taken, `server_final`.
pub fn scram(sha1: bool, server_first: &[u8], server_final: &[u8]) -> Result<(), ScramError> {
    let mechanism = if sha1 {
        Mechanism::ScramSha1
    } else {
        Mechanism::ScramSha256
    };
    let mut client = ScramClient::with_nonce(mechanism, "u", "p", "fuzz")?;
    client.handle_server_first(server_first)?;
    client.handle_server_final(server_final)
}

/// A server that answers any request with the same bytes.
struct Replay {
    data: Vec<u8>,
    answer_this_request: bool,
}

impl sealed::Sealed for Replay {}

impl Transport for Replay {
    fn write_all<'a>(
        &'a mut self,
        bytes: &'a [u8],
        _deadline: Option<std::time::Instant>,
    ) -> impl Future<Output = io::Result<()>> + Send + 'a {
        if self.answer_this_request && self.data.len() >= 12 && bytes.len() >= 8 {
            self.data[8..12].copy_from_slice(&bytes[4..8]);
        }
        std::future::ready(Ok(()))
    }

    fn read_exact<'a>(
        &'a mut self,
        buf: &'a mut [u8],
        _deadline: Option<std::time::Instant>,
    ) -> impl Future<Output = io::Result<()>> + Send + 'a {
        std::future::ready(if self.data.len() < buf.len() {
            Err(io::Error::from(io::ErrorKind::UnexpectedEof))
        } else {
            let rest = self.data.split_off(buf.len());
            buf.copy_from_slice(&self.data);
            self.data = rest;
            Ok(())
        })
    }

    fn is_closed(&mut self) -> bool {
        false
    }
}
