//! Connection strings: rules of docs/spec-compliance.md's "Options"
//! section (options settable from a connection string), read by
//! `cmap-core/src/connection_string.rs`: what an error, a warning or
//! `Debug` quotes around the last `@`, the hosts and ports accepted, and
//! the option an unknown one's typo suggests.
//!
//! Spec: "Connection Pool Options" (Detailed Design).

use cmap_core::PoolOptions;

use crate::support::suggestions;

/// One item of a generated connection string's query, and what the
/// parser says about it.
#[derive(Clone, Copy)]
enum Item {
    /// Says nothing itself; its `@` may be the string's last one.
    Quiet(&'static str),
    /// An unknown option: its name, and the suggestion when quoted.
    Unknown(&'static str, &'static str, Option<&'static str>),
    /// A pool option whose value is refused: the value's offset in the
    /// item, and the value.
    BadValue(&'static str, usize, &'static str),
    /// A query item refused as a whole: the text the error quotes (at the
    /// item's start).
    Refused(&'static str, &'static str),
}

impl Item {
    fn text(self) -> &'static str {
        match self {
            Item::Quiet(t) | Item::Unknown(t, ..) | Item::BadValue(t, ..) | Item::Refused(t, _) => t,
        }
    }
}

/// "No text that comes before the last `@` of the string is quoted" (the
/// module doc of `connection_string.rs`), and everything from it on is:
/// generated strings put the last `@` before, inside and after each host,
/// option name and option value that an error, a warning or `Debug` may
/// show, and each of them must be quoted exactly when it starts at or
/// after that `@` (and an unknown option gets its suggestion exactly
/// then). The offsets the parser computes for every part of the string
/// decide this; an offset off by one or more moves some part across the
/// line.
///
/// Catches: 16 mutants of the offset arithmetic of
/// `ConnectionString::parse` and `parse_after_user_info` (`+` replaced by
/// `-` or `*`, `+=` by `*=`, `<` by `<=` in `quote`), and the `Debug` of
/// `ConnectionString` writing nothing.
#[test]
fn text_is_quoted_exactly_when_it_starts_at_or_after_the_last_at() {
    use cmap_core::{ConnectionString, ConnectionStringError, OptionsError, REDACTED};
    let expect = |start: usize, secret_end: usize, text: &str| -> String {
        if start >= secret_end {
            text.to_owned()
        } else {
            REDACTED.to_owned()
        }
    };
    let items = [
        Item::Quiet("appName=@"),
        Item::Quiet("appName=a@b"),
        Item::Quiet(""),
        Item::Unknown("zqa=1", "zqa", None),
        Item::Unknown("maxPoolSizee=1", "maxPoolSizee", Some("maxPoolSize")),
        Item::BadValue("maxIdleTimeMS=@", 14, "@"),
        Item::BadValue("minPoolSize=q@", 12, "q@"),
        Item::Refused("@", "@"),
        Item::Refused("@=1", "@"),
        Item::Refused("z-q=1", "z-q"),
    ];
    let mut queries: Vec<Vec<Item>> = vec![vec![]];
    for a in items {
        queries.push(vec![a]);
        for b in items {
            queries.push(vec![a, b]);
        }
    }
    let mut checked = 0;
    for prefix in ["mongodb://", "mongodb://u:p@", "mongodb://u@", "mongodb+srv://"] {
        let srv = prefix.starts_with("mongodb+srv");
        let host_sets: &[&[&str]] = if srv {
            &[&["d"], &["b^d"]]
        } else {
            &[&["d"], &["b^d"], &["db", "b^d"]]
        };
        for hosts in host_sets {
            for path in ["", "/", "/abc"] {
                for query in &queries {
                    let mut uri = format!("{prefix}{}{path}", hosts.join(","));
                    let authority_at = prefix.len();
                    let mut starts = Vec::new();
                    if !query.is_empty() {
                        uri.push('?');
                        for (i, item) in query.iter().enumerate() {
                            if i > 0 {
                                uri.push('&');
                            }
                            starts.push(uri.len());
                            uri.push_str(item.text());
                        }
                    }
                    let secret_end = uri.rfind('@').unwrap_or(0);
                    let parsed = ConnectionString::parse(&uri);
                    match &parsed {
                        Err(ConnectionStringError::Host { host, .. }) => {
                            let at = uri[authority_at..].find("b^d").unwrap() + authority_at;
                            assert_eq!(*host, expect(at, secret_end, "b^d"), "{uri}");
                            checked += 1;
                        }
                        Err(ConnectionStringError::Option { option, .. }) => {
                            let (i, quoted) = query
                                .iter()
                                .enumerate()
                                .find_map(|(i, item)| match item {
                                    Item::Refused(_, quoted) => Some((i, *quoted)),
                                    _ => None,
                                })
                                .unwrap_or_else(|| panic!("{uri}: {option}"));
                            assert_eq!(*option, expect(starts[i], secret_end, quoted), "{uri}");
                            checked += 1;
                        }
                        Err(_) => {}
                        Ok(cs) => {
                            let shown = !format!("{cs:?}").contains(&format!("hosts: {REDACTED:?}"));
                            assert_eq!(shown, authority_at >= secret_end, "{uri}: {cs:?}");
                            let mut unknown = cs.unknown_options().iter();
                            for (i, item) in query.iter().enumerate() {
                                if let Item::Unknown(_, name, suggestion) = item {
                                    let u = unknown.next().unwrap();
                                    let quoted = starts[i] >= secret_end;
                                    assert_eq!(u.name(), expect(starts[i], secret_end, name), "{uri}");
                                    assert_eq!(u.suggestion(), suggestion.filter(|_| quoted), "{uri}");
                                    checked += 1;
                                }
                            }
                            let bad = query.iter().enumerate().find_map(|(i, item)| match item {
                                Item::BadValue(_, offset, value) => Some((starts[i] + offset, *value)),
                                _ => None,
                            });
                            match (PoolOptions::from_connection_string(&uri, false), bad) {
                                (Err(OptionsError::Invalid { value, .. }), Some((at, text))) => {
                                    assert_eq!(value, expect(at, secret_end, text), "{uri}");
                                    checked += 1;
                                }
                                (Ok(_), None) => {}
                                (other, _) => panic!("{uri}: {other:?}"),
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 500, "{checked}");
}

/// A host in brackets must be an IPv6 address (hex digits, `:`, `.` and a
/// `%` zone), not empty; a port is digits only, so `+1` is no port even
/// though Rust's integer parsing takes it.
///
/// Catches: in `parse_host`, `ip.is_empty() || !ip.bytes().all(..)` with
/// `&&`; in `parse_port`, `port.is_empty() || !port.bytes().all(..)` with
/// `&&`.
#[test]
fn a_bracketed_host_must_be_ipv6_and_a_port_only_digits() {
    use cmap_core::{ConnectionString, ConnectionStringError};
    for uri in [
        "mongodb://[]/",
        "mongodb://[]:27017/",
        "mongodb://[zz]/",
        "mongodb://db:+1/",
    ] {
        assert!(
            matches!(
                ConnectionString::parse(uri),
                Err(ConnectionStringError::Host { .. })
            ),
            "{uri} is accepted"
        );
    }
    assert!(ConnectionString::parse("mongodb://[::1]:1/").is_ok());
}

/// A typo of one wrong letter is one edit from the option meant, and so
/// is a swap of two letters, wherever it is, even the first two: the
/// warning suggests that option (the edit distance of `nearest`, optimal
/// string alignment). `TwimeoutMS` is one swap from `wTimeoutMS` and one
/// deletion from `timeoutMS`; the swap, keeping the same letters, wins.
///
/// Catches: in `distance`, the substitution cost `rows[i - 1][j - 1] +
/// cost` with `*` (a wrong letter after a matching prefix cost nothing,
/// and the option meant was no longer "near"), and each `i - 2` or `j - 2`
/// of the transposition step with `/` (the same at the third and fourth
/// letters, wrong at the first two).
#[test]
fn an_unknown_option_one_wrong_letter_off_suggests_the_option_meant() {
    let cs = cmap_core::ConnectionString::parse(
        "mongodb://db/?maxPoolSixe=3&minPoolSize=1&wTimeoitMS=5&TwimeoutMS=5",
    )
    .unwrap();
    assert_eq!(
        suggestions(&cs),
        [
            ("maxPoolSixe", Some("maxPoolSize")),
            ("wTimeoitMS", Some("wTimeoutMS")),
            ("TwimeoutMS", Some("wTimeoutMS"))
        ]
    );
}
