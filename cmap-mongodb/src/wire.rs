//! MongoDB's wire protocol, as far as commands need it: OP_MSG messages
//! with one body section (the OP_MSG specification), written and read as
//! bytes. No I/O here: [`Connection`](crate::Connection) moves the bytes.

use std::sync::atomic::{AtomicI32, Ordering};

use bson::Document;

use crate::error::ProtocolError;

/// OP_MSG's opcode.
pub(crate) const OP_MSG: i32 = 2013;

/// The message header: length, request id, response to, opcode.
pub(crate) const HEADER_LEN: usize = 16;

/// `flagBits`: a CRC-32C checksum ends the message.
const CHECKSUM_PRESENT: u32 = 1;
/// `flagBits`: another message follows without a request (exhaust
/// cursors, or fire-and-forget writes); never asked for here.
const MORE_TO_COME: u32 = 1 << 1;
/// The required bits (0 to 15): a reader must fail on one it does not know.
const REQUIRED_BITS: u32 = 0xFFFF;

/// The largest message a server takes before it has said otherwise in its
/// `hello` (`maxMessageSizeBytes`'s default, 48 MB).
pub(crate) const DEFAULT_MAX_MESSAGE_SIZE: usize = 48_000_000;

/// Request ids, process-wide, as the drivers draw them: a reply names the
/// id of its request (`responseTo`), so that a reply to another request is
/// caught.
pub(crate) fn next_request_id() -> i32 {
    static NEXT: AtomicI32 = AtomicI32::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Writes `command` with `$db: db` appended as one OP_MSG (header, no
/// flags, one body section) into `out`, which it clears first, and
/// returns the request id.
///
/// The command is not changed (the OP_MSG specification forbids mutating
/// the user's document): its BSON is written once and `$db` spliced in
/// before the document's final zero byte.
#[cfg(test)]
pub(crate) fn encode_command(
    command: &Document,
    db: &str,
    max_message_size: usize,
    out: &mut Vec<u8>,
) -> Result<i32, ProtocolError> {
    encode_command_with(command, db, None, max_message_size, out)
}

/// [`encode_command`], with `maxTimeMS: max_time_ms` (an int64) spliced in
/// before `$db` when given (the client-side operations timeout
/// specification). A command that has its own `maxTimeMS` is not looked
/// at: the specification leaves that case undefined and forbids looking.
pub(crate) fn encode_command_with(
    command: &Document,
    db: &str,
    max_time_ms: Option<i64>,
    max_message_size: usize,
    out: &mut Vec<u8>,
) -> Result<i32, ProtocolError> {
    if db.is_empty() || db.contains('\0') {
        return Err(ProtocolError::InvalidDatabase);
    }
    if command.contains_key("$db") {
        // It would be sent twice; the database is the `db` argument.
        return Err(ProtocolError::InvalidDatabase);
    }
    out.clear();
    out.extend_from_slice(&[0; HEADER_LEN]);
    out.extend_from_slice(&0u32.to_le_bytes()); // flagBits
    out.push(0); // section kind 0: the body
    let body_start = out.len();
    command
        .to_writer(&mut *out)
        .map_err(|e| ProtocolError::Serialize(e.to_string()))?;
    // The document's closing zero goes; `$db` (a string element) and a new
    // closing zero come in its place.
    out.pop();
    if let Some(ms) = max_time_ms {
        out.push(0x12);
        out.extend_from_slice(b"maxTimeMS\0");
        out.extend_from_slice(&ms.to_le_bytes());
    }
    out.push(0x02);
    out.extend_from_slice(b"$db\0");
    out.extend_from_slice(&i32_len(db.len() + 1)?.to_le_bytes());
    out.extend_from_slice(db.as_bytes());
    out.push(0);
    out.push(0);
    let body_len = i32_len(out.len() - body_start)?;
    out[body_start..body_start + 4].copy_from_slice(&body_len.to_le_bytes());

    if out.len() > max_message_size {
        return Err(ProtocolError::TooLarge {
            size: out.len(),
            max: max_message_size,
        });
    }
    let request_id = next_request_id();
    let total = i32_len(out.len())?;
    out[0..4].copy_from_slice(&total.to_le_bytes());
    out[4..8].copy_from_slice(&request_id.to_le_bytes());
    out[8..12].copy_from_slice(&0i32.to_le_bytes());
    out[12..16].copy_from_slice(&OP_MSG.to_le_bytes());
    Ok(request_id)
}

fn i32_len(len: usize) -> Result<i32, ProtocolError> {
    i32::try_from(len).map_err(|_| ProtocolError::TooLarge {
        size: len,
        max: i32::MAX as usize,
    })
}

/// A reply's header, read before its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// The whole message's length, header included.
    pub(crate) length: usize,
    pub(crate) response_to: i32,
    pub(crate) opcode: i32,
}

impl Header {
    /// Reads a header, checking that the message it announces is an
    /// OP_MSG of a length between the smallest possible and `max`.
    pub(crate) fn parse(bytes: &[u8; HEADER_LEN], max: usize) -> Result<Header, ProtocolError> {
        let word = |i: usize| i32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        let header = Header {
            length: usize::try_from(word(0)).map_err(|_| ProtocolError::Length(i64::from(word(0))))?,
            response_to: word(8),
            opcode: word(12),
        };
        if header.opcode != OP_MSG {
            return Err(ProtocolError::Opcode(header.opcode));
        }
        // Header, flags, a kind byte and the smallest document (5 bytes).
        if header.length < HEADER_LEN + 4 + 1 + 5 || header.length > max {
            return Err(ProtocolError::Length(header.length as i64));
        }
        Ok(header)
    }
}

/// Reads the body of an OP_MSG reply (what follows the header): its flags,
/// then its sections. The body section is the reply; the documents of a
/// kind-1 section are added to it as an array under the section's
/// identifier, as the drivers read them.
pub(crate) fn decode_reply(body: &[u8]) -> Result<Document, ProtocolError> {
    let (flags, mut sections) = body.split_first_chunk::<4>().ok_or(ProtocolError::Truncated)?;
    let flags = u32::from_le_bytes(*flags);
    let unknown = flags & REQUIRED_BITS & !(CHECKSUM_PRESENT | MORE_TO_COME);
    if unknown != 0 {
        return Err(ProtocolError::Flags(flags));
    }
    if flags & MORE_TO_COME != 0 {
        // Only an exhaust request or a fire-and-forget write gets one.
        return Err(ProtocolError::Flags(flags));
    }
    if flags & CHECKSUM_PRESENT != 0 {
        // "Reserved for future support": the checksum is not verified.
        let end = sections.len().checked_sub(4).ok_or(ProtocolError::Truncated)?;
        sections = &sections[..end];
    }
    let mut reply: Option<Document> = None;
    let mut sequences = Vec::new();
    while let Some((&kind, rest)) = sections.split_first() {
        match kind {
            0 => {
                let len = document_len(rest)?;
                if reply.is_some() {
                    return Err(ProtocolError::Sections("two body sections"));
                }
                reply = Some(read_document(&rest[..len])?);
                sections = &rest[len..];
            }
            1 => {
                let len = document_len(rest)?;
                let mut section = &rest[4..len];
                let nul = section
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or(ProtocolError::Sections(
                        "a document sequence without an identifier",
                    ))?;
                let identifier = std::str::from_utf8(&section[..nul])
                    .map_err(|_| ProtocolError::Sections("a document sequence identifier that is not UTF-8"))?
                    .to_owned();
                section = &section[nul + 1..];
                let mut documents = Vec::new();
                while !section.is_empty() {
                    let doc_len = document_len(section)?;
                    documents.push(bson::Bson::Document(read_document(&section[..doc_len])?));
                    section = &section[doc_len..];
                }
                sequences.push((identifier, documents));
                sections = &rest[len..];
            }
            other => return Err(ProtocolError::SectionKind(other)),
        }
    }
    let mut reply = reply.ok_or(ProtocolError::Sections("no body section"))?;
    for (identifier, documents) in sequences {
        reply.insert(identifier, documents);
    }
    Ok(reply)
}

/// The length a BSON document (or a document sequence) at the start of
/// `bytes` announces, checked against what is there.
fn document_len(bytes: &[u8]) -> Result<usize, ProtocolError> {
    let (prefix, _) = bytes.split_first_chunk::<4>().ok_or(ProtocolError::Truncated)?;
    let len = i32::from_le_bytes(*prefix);
    match usize::try_from(len) {
        Ok(len) if (5..=bytes.len()).contains(&len) => Ok(len),
        _ => Err(ProtocolError::Truncated),
    }
}

fn read_document(bytes: &[u8]) -> Result<Document, ProtocolError> {
    Document::from_reader(bytes).map_err(|e| ProtocolError::Deserialize(e.to_string()))
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    fn reply_bytes(flags: u32, sections: &[u8]) -> Vec<u8> {
        let mut body = flags.to_le_bytes().to_vec();
        body.extend_from_slice(sections);
        body
    }

    fn kind0(doc: &Document) -> Vec<u8> {
        let mut out = vec![0];
        out.extend(doc.to_vec().unwrap());
        out
    }

    #[test]
    fn a_command_is_one_op_msg_with_db_appended_and_the_document_untouched() {
        let command = doc! { "ping": 1, "comment": "x" };
        let before = command.clone();
        let mut out = vec![9; 3];
        let id = encode_command(&command, "admin", DEFAULT_MAX_MESSAGE_SIZE, &mut out).unwrap();
        assert_eq!(command, before);
        let header = Header::parse(out[..16].try_into().unwrap(), usize::MAX).unwrap();
        assert_eq!(header.length, out.len());
        assert_eq!(i32::from_le_bytes(out[4..8].try_into().unwrap()), id);
        assert_eq!(header.response_to, 0);
        assert_eq!(&out[16..21], &[0, 0, 0, 0, 0], "no flags, then a body section");
        let body = Document::from_reader(&out[21..]).unwrap();
        assert_eq!(body, doc! { "ping": 1, "comment": "x", "$db": "admin" });
        // The body is the rest of the message, exactly.
        assert_eq!(document_len(&out[21..]).unwrap(), out.len() - 21);
    }

    #[test]
    fn max_time_ms_is_spliced_in_before_db() {
        let command = doc! { "find": "c" };
        let mut out = Vec::new();
        encode_command_with(&command, "db", Some(1234), usize::MAX, &mut out).unwrap();
        let header = Header::parse(out[..16].try_into().unwrap(), usize::MAX).unwrap();
        assert_eq!(header.length, out.len());
        let body = Document::from_reader(&out[21..]).unwrap();
        assert_eq!(body, doc! { "find": "c", "maxTimeMS": 1234i64, "$db": "db" });
        assert_eq!(document_len(&out[21..]).unwrap(), out.len() - 21);
    }

    #[test]
    fn request_ids_are_not_reused() {
        let mut out = Vec::new();
        let a = encode_command(&doc! { "ping": 1 }, "admin", usize::MAX, &mut out).unwrap();
        let b = encode_command(&doc! { "ping": 1 }, "admin", usize::MAX, &mut out).unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn a_message_over_the_servers_limit_is_refused_before_it_is_sent() {
        let mut out = Vec::new();
        let command = doc! { "insert": "c", "documents": [{ "x": "y".repeat(100) }] };
        let err = encode_command(&command, "db", 100, &mut out).unwrap_err();
        assert!(
            matches!(err, ProtocolError::TooLarge { max: 100, size } if size > 100),
            "{err:?}"
        );
        assert!(encode_command(&command, "db", 200, &mut out).is_ok());
    }

    #[test]
    fn a_message_of_exactly_the_servers_limit_is_sent() {
        // maxMessageSizeBytes is the largest message the server takes.
        let mut out = Vec::new();
        let command = doc! { "ping": 1 };
        encode_command(&command, "admin", usize::MAX, &mut out).unwrap();
        let size = out.len();
        assert!(encode_command(&command, "admin", size, &mut out).is_ok());
        assert_eq!(out.len(), size);
        assert_eq!(
            encode_command(&command, "admin", size - 1, &mut out),
            Err(ProtocolError::TooLarge { size, max: size - 1 })
        );
    }

    #[test]
    fn a_database_name_must_be_one_and_given_once() {
        let mut out = Vec::new();
        for db in ["", "a\0b"] {
            assert_eq!(
                encode_command(&doc! { "ping": 1 }, db, usize::MAX, &mut out),
                Err(ProtocolError::InvalidDatabase)
            );
        }
        assert_eq!(
            encode_command(&doc! { "ping": 1, "$db": "other" }, "admin", usize::MAX, &mut out),
            Err(ProtocolError::InvalidDatabase)
        );
    }

    #[test]
    fn headers_that_are_not_an_op_msg_of_a_sane_length_are_refused() {
        let header = |length: i32, opcode: i32| {
            let mut h = [0u8; 16];
            h[..4].copy_from_slice(&length.to_le_bytes());
            h[12..].copy_from_slice(&opcode.to_le_bytes());
            h
        };
        assert!(Header::parse(&header(26, OP_MSG), 1000).is_ok());
        assert_eq!(Header::parse(&header(26, 1), 1000), Err(ProtocolError::Opcode(1)));
        assert_eq!(
            Header::parse(&header(25, OP_MSG), 1000),
            Err(ProtocolError::Length(25))
        );
        // The limit itself is a possible length.
        assert_eq!(
            Header::parse(&header(1000, OP_MSG), 1000).map(|h| h.length),
            Ok(1000)
        );
        assert_eq!(
            Header::parse(&header(1001, OP_MSG), 1000),
            Err(ProtocolError::Length(1001))
        );
        assert_eq!(
            Header::parse(&header(-1, OP_MSG), 1000),
            Err(ProtocolError::Length(-1))
        );
    }

    #[test]
    fn a_reply_is_its_body_with_document_sequences_added() {
        let body = doc! { "ok": 1.0 };
        assert_eq!(decode_reply(&reply_bytes(0, &kind0(&body))).unwrap(), body);

        let mut sequence = vec![1];
        let docs: Vec<u8> = [doc! { "a": 1 }, doc! { "a": 2 }]
            .iter()
            .flat_map(|d| d.to_vec().unwrap())
            .collect();
        let len = 4 + b"docs\0".len() + docs.len();
        sequence.extend_from_slice(&(len as i32).to_le_bytes());
        sequence.extend_from_slice(b"docs\0");
        sequence.extend_from_slice(&docs);
        let mut sections = sequence;
        sections.extend(kind0(&body));
        assert_eq!(
            decode_reply(&reply_bytes(0, &sections)).unwrap(),
            doc! { "ok": 1.0, "docs": [{ "a": 1 }, { "a": 2 }] }
        );
    }

    #[test]
    fn a_checksum_is_skipped() {
        let body = doc! { "ok": 1.0 };
        let mut sections = kind0(&body);
        sections.extend_from_slice(&[1, 2, 3, 4]);
        assert_eq!(
            decode_reply(&reply_bytes(CHECKSUM_PRESENT, &sections)).unwrap(),
            body
        );
    }

    #[test]
    fn malformed_replies_are_errors() {
        let body = kind0(&doc! { "ok": 1.0 });
        // An unknown required flag bit, and moreToCome, never asked for.
        assert_eq!(
            decode_reply(&reply_bytes(1 << 5, &body)),
            Err(ProtocolError::Flags(1 << 5))
        );
        assert_eq!(
            decode_reply(&reply_bytes(MORE_TO_COME, &body)),
            Err(ProtocolError::Flags(2))
        );
        // An optional bit (16 and up) is ignored.
        assert!(decode_reply(&reply_bytes(1 << 16, &body)).is_ok());
        assert_eq!(
            decode_reply(&reply_bytes(0, &[2, 5, 0, 0, 0, 0])),
            Err(ProtocolError::SectionKind(2))
        );
        assert_eq!(
            decode_reply(&reply_bytes(0, &[])),
            Err(ProtocolError::Sections("no body section"))
        );
        let mut two = body.clone();
        two.extend(&body);
        assert_eq!(
            decode_reply(&reply_bytes(0, &two)),
            Err(ProtocolError::Sections("two body sections"))
        );
        assert_eq!(
            decode_reply(&reply_bytes(0, &body[..body.len() - 1])),
            Err(ProtocolError::Truncated)
        );
        assert_eq!(decode_reply(&[0, 0]), Err(ProtocolError::Truncated));
        let mut short = reply_bytes(0, &body);
        short.truncate(short.len() - 2);
        assert_eq!(decode_reply(&short), Err(ProtocolError::Truncated));
    }
}
