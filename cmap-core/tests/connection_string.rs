//! Rules for reading a connection string: what is rejected, what is a
//! warning (an unknown option, with the nearest known one), what is an
//! error only in strict mode, the limits of numbers, the default port, and
//! that no error or warning quotes a password or any part of one.

mod support;

use cmap_core::{Address, ConnectionString, ConnectionStringError, OptionsError, PoolOptions, REDACTED};
use support::suggestions;

fn parse_err(uri: &str) -> ConnectionStringError {
    ConnectionString::parse(uri).expect_err(uri)
}

#[test]
fn anything_but_a_mongodb_uri_is_rejected() {
    for uri in [
        "this is not a uri",
        "",
        "nohost",
        "db:27017",
        "://db/",
        "mongodb:/db/",
    ] {
        assert_eq!(parse_err(uri), ConnectionStringError::NotAUri, "{uri:?}");
    }
    let err = parse_err("postgres://app:pw@db:5432/app");
    assert_eq!(
        err,
        ConnectionStringError::Scheme {
            scheme: "postgres".into()
        }
    );
    assert!(err.to_string().contains("mongodb://"), "{err}");
    // Through the pool options too, as a typed error.
    assert!(matches!(
        PoolOptions::from_connection_string("this is not a uri", false),
        Err(OptionsError::ConnectionString(ConnectionStringError::NotAUri))
    ));
}

#[test]
fn both_schemes_are_accepted_and_srv_takes_one_host_without_port() {
    let cs = ConnectionString::parse("mongodb+srv://cluster0.example.net/?maxPoolSize=5").unwrap();
    assert_eq!(cs.srv_name(), Some("cluster0.example.net"));
    assert!(cs.hosts().is_empty());
    assert!(ConnectionString::parse("MongoDB://db").is_ok());
    assert!(matches!(
        parse_err("mongodb+srv://a.example,b.example/"),
        ConnectionStringError::Srv { .. }
    ));
    assert!(matches!(
        parse_err("mongodb+srv://a.example:27017/"),
        ConnectionStringError::Srv { .. }
    ));
}

#[test]
fn a_host_without_a_port_gets_the_default_port_only_in_a_valid_uri() {
    let cs = ConnectionString::parse("mongodb://nohost").unwrap();
    assert_eq!(cs.hosts(), [Address::new("nohost", 27017)]);
    let cs = ConnectionString::parse("mongodb://a,b:27018,[::1],[::1]:27019/db?maxPoolSize=1").unwrap();
    assert_eq!(
        cs.hosts(),
        [
            Address::new("a", 27017),
            Address::new("b", 27018),
            Address::new("[::1]", 27017),
            Address::new("[::1]", 27019),
        ]
    );
    let cs = ConnectionString::parse("mongodb://%2Ftmp%2Fmongodb-27017.sock/").unwrap();
    assert_eq!(cs.hosts(), [Address::unix("/tmp/mongodb-27017.sock")]);

    for uri in [
        "mongodb://nohost:port",
        "mongodb://nohost:0",
        "mongodb://nohost:65536",
        "mongodb://nohost:",
        "mongodb://a,,b",
        "mongodb://no host/",
        "mongodb://::1/",
        "mongodb://[::1/",
        "mongodb://%2Ftmp%2Fsocket/",
    ] {
        assert!(
            matches!(parse_err(uri), ConnectionStringError::Host { .. }),
            "{uri}: {:?}",
            parse_err(uri)
        );
    }
    for uri in [
        "mongodb://",
        "mongodb:///db",
        "mongodb://?maxPoolSize=1",
        "mongodb://app:pw@/",
    ] {
        assert_eq!(parse_err(uri), ConnectionStringError::NoHost, "{uri}");
    }
    let err = parse_err("mongodb://db:port/");
    assert!(err.to_string().contains("db:port"), "a host is quoted: {err}");
}

#[test]
fn a_malformed_query_or_database_is_rejected() {
    assert!(matches!(
        parse_err("mongodb://db/?maxPoolSize"),
        ConnectionStringError::Option { .. }
    ));
    assert!(matches!(
        parse_err("mongodb://db/?max-pool=3"),
        ConnectionStringError::Option { .. }
    ));
    assert!(matches!(
        parse_err("mongodb://db/a/b"),
        ConnectionStringError::Database { .. }
    ));
    // An empty item (a trailing `&`) is not an error.
    assert!(ConnectionString::parse("mongodb://db/?maxPoolSize=3&").is_ok());
}

#[test]
fn an_unknown_option_names_the_nearest_known_one() {
    let cs = ConnectionString::parse("mongodb://db/?maxPoolSizee=3&tsl=true&zzzzzzzz=1").unwrap();
    assert_eq!(
        suggestions(&cs),
        [
            ("maxPoolSizee", Some("maxPoolSize")),
            ("tsl", Some("tls")),
            ("zzzzzzzz", None)
        ]
    );
    assert_eq!(
        cs.unknown_options()[0].to_string(),
        r#"unknown connection string option "maxPoolSizee" (did you mean maxPoolSize?)"#
    );
    // Case does not make an option unknown, and a driver's options are known.
    let cs = ConnectionString::parse("mongodb://db/?MAXPOOLSIZE=3&appName=x&TLS=true&w=majority").unwrap();
    assert!(cs.unknown_options().is_empty());
}

#[test]
fn an_unknown_option_is_ignored_by_default_and_an_error_in_strict_mode() {
    let o = PoolOptions::from_connection_string("mongodb://db/?maxPoolSizee=3", false).unwrap();
    assert_eq!(o.max_pool_size(), 100, "the typo sets nothing");
    let err = PoolOptions::from_connection_string("mongodb://db/?maxPoolSizee=3", true).unwrap_err();
    assert_eq!(
        err,
        OptionsError::Unknown {
            option: "maxPoolSizee".into(),
            suggestion: Some("maxPoolSize"),
        }
    );
    assert!(err.to_string().contains("did you mean maxPoolSize?"), "{err}");
    // The deprecated wait-queue options the spec removed are unknown.
    for option in ["waitQueueSize", "waitQueueMultiple"] {
        let uri = format!("mongodb://db/?{option}=1");
        assert!(PoolOptions::from_connection_string(&uri, true).is_err(), "{uri}");
    }
}

#[test]
fn a_number_over_the_limit_is_too_large_and_says_the_limit() {
    let err =
        PoolOptions::from_connection_string("mongodb://db/?waitQueueTimeoutMS=99999999999999999999", true)
            .unwrap_err();
    assert_eq!(
        err,
        OptionsError::TooLarge {
            option: "waitQueueTimeoutMS",
            value: "99999999999999999999".into(),
            limit: u64::MAX,
        }
    );
    let text = err.to_string();
    assert!(text.contains("non-negative integer that is too large"), "{text}");
    assert!(text.contains("18446744073709551615"), "{text}");

    let err = PoolOptions::from_connection_string("mongodb://db/?maxPoolSize=4294967296", true).unwrap_err();
    assert_eq!(
        err,
        OptionsError::TooLarge {
            option: "maxPoolSize",
            value: "4294967296".into(),
            limit: 4294967295,
        }
    );
    assert!(err.to_string().contains("4294967295"));
    let o = PoolOptions::from_connection_string("mongodb://db/?maxPoolSize=4294967295", true).unwrap();
    assert_eq!(o.max_pool_size(), u32::MAX);
    // Not a number stays not a number.
    let err = PoolOptions::from_connection_string("mongodb://db/?maxPoolSize=1e3", true).unwrap_err();
    assert!(matches!(err, OptionsError::Invalid { .. }), "{err:?}");
}

#[test]
fn a_percent_encoded_password_with_any_character_is_accepted() {
    for password in [
        "Qx7%3FZq9",
        "Qx7%40Zq9",
        "Qx7%2FZq9",
        "Qx7%25Zq9",
        "%3F%40%2F%25%3A",
    ] {
        let uri = format!("mongodb://app:{password}@db/?maxPoolSize=3");
        let cs = ConnectionString::parse(&uri).unwrap_or_else(|e| panic!("{uri}: {e}"));
        assert_eq!(cs.hosts(), [Address::new("db", 27017)]);
        assert_eq!(
            PoolOptions::from_connection_string(&uri, true)
                .unwrap()
                .max_pool_size(),
            3
        );
    }
    // An `@` in an option's value is not taken for the end of a password.
    let cs = ConnectionString::parse("mongodb://db/?appName=me@example&maxPoolSize=3").unwrap();
    assert_eq!(cs.hosts(), [Address::new("db", 27017)]);
}

#[test]
fn an_unencoded_at_colon_or_percent_in_the_user_info_is_rejected() {
    for uri in [
        "mongodb://app:Qx7@Zq9@db/",
        "mongodb://app:Qx7:Zq9@db/",
        "mongodb://app:Qx7%Zq9@db/",
        "mongodb://app:Qx7/Zq9@db/",
        "mongodb://app:Qx7?Zq9@db/",
    ] {
        assert!(
            matches!(parse_err(uri), ConnectionStringError::UserInfo { .. }),
            "{uri}: {:?}",
            parse_err(uri)
        );
    }
}

/// Every text a string can produce: the parse error, or the warnings for
/// its unknown options, the errors of strict and lenient parsing, and the
/// `Debug` of the parsed string.
fn everything_said_about(uri: &str) -> Vec<String> {
    let mut said = Vec::new();
    match ConnectionString::parse(uri) {
        Err(e) => said.extend([e.to_string(), format!("{e:?}")]),
        Ok(cs) => {
            said.push(format!("{cs:?}"));
            said.push(format!("{:?}", cs.user_info()));
            for unknown in cs.unknown_options() {
                said.extend([
                    unknown.to_string(),
                    unknown.name().to_owned(),
                    format!("{unknown:?}"),
                ]);
            }
        }
    }
    for strict in [false, true] {
        if let Err(e) = PoolOptions::from_connection_string(uri, strict) {
            said.extend([e.to_string(), format!("{e:?}")]);
        }
    }
    said
}

#[test]
fn no_error_or_warning_quotes_any_part_of_a_password() {
    // Each password is built of pieces that appear nowhere else, around
    // the characters that must be percent-encoded, given both ways.
    let mut passwords = Vec::new();
    for special in ["?", "@", "/", "%", "?@", "/?", "@/", "%?", "&", "=", ":"] {
        passwords.push(format!("Qx7{special}Zq9"));
        let encoded: String = special.chars().map(|c| format!("%{:02X}", c as u32)).collect();
        passwords.push(format!("Qx7{encoded}Zq9"));
    }
    // Passwords that read as the rest of a connection string once cut at
    // their unencoded `?` or `/`.
    passwords.extend(
        [
            "123?Qx7Zq9",
            "123/?maxPoolSizee=Qx7Zq9",
            "123?maxPoolSize=Qx7Zq9",
            "Qx7/Zq9?waitQueueTimeoutMS=99999999999999999999",
            "Qx7Zq9@db:port/?x=1",
            "Qx7&maxPoolSizee=Zq9",
        ]
        .map(String::from),
    );
    let pieces = ["Qx7", "Zq9", "123"];
    let rests = [
        "db/?maxPoolSize=3",
        "db/?maxPoolSizee=3",
        "db/?maxPoolSize=-1",
        "db/?waitQueueTimeoutMS=99999999999999999999",
        "db:port/?maxPoolSize=3",
        "db/?appName=a@b&maxPoolSizee=3",
        "db",
    ];
    for password in &passwords {
        for rest in rests {
            let uri = format!("mongodb://app:{password}@{rest}");
            for text in everything_said_about(&uri) {
                for piece in pieces {
                    assert!(
                        !text.contains(piece),
                        "{uri:?} said {text:?}, which holds {piece:?} of the password"
                    );
                }
                assert!(!text.contains(password.as_str()), "{uri:?} said {text:?}");
            }
        }
    }
}

#[test]
fn what_may_be_a_password_is_shown_redacted() {
    // With an unencoded `/` the password's tail could be options; if the
    // string reads well otherwise, its unknown options are redacted.
    let cs = ConnectionString::parse("mongodb://app:123/?x=Qx7@db").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cs.unknown_options()[0].name(), REDACTED);
    assert_eq!(cs.unknown_options()[0].suggestion(), None);
    // After the last `@`, names are quoted.
    let cs = ConnectionString::parse("mongodb://app:pw@db/?maxPoolSizee=1").unwrap();
    assert_eq!(cs.unknown_options()[0].name(), "maxPoolSizee");
}

#[test]
fn the_user_information_is_percent_decoded_and_debug_shows_none_of_it() {
    let cs = ConnectionString::parse("mongodb://us%3Aer:p%40ss%2Fw%3Ard@db/").unwrap();
    let user = cs.user_info().expect("user information");
    assert_eq!((user.username(), user.password()), ("us:er", Some("p@ss/w:rd")));
    let shown = format!("{user:?} {cs:?}");
    assert!(!shown.contains("us:er") && !shown.contains("p@ss"), "{shown}");

    let cs = ConnectionString::parse("mongodb://only-a-user@db/").unwrap();
    let user = cs.user_info().unwrap();
    assert_eq!((user.username(), user.password()), ("only-a-user", None));
    assert_eq!(
        ConnectionString::parse("mongodb://db/").unwrap().user_info(),
        None
    );
    // An empty password is a password.
    let cs = ConnectionString::parse("mongodb://u:@db/").unwrap();
    assert_eq!(cs.user_info().unwrap().password(), Some(""));
    // Not UTF-8 once decoded.
    assert!(matches!(
        ConnectionString::parse("mongodb://u:%FF@db/").unwrap_err(),
        ConnectionStringError::UserInfo { .. }
    ));
}

#[test]
fn the_database_is_read_and_decoded() {
    assert_eq!(
        ConnectionString::parse("mongodb://db/app").unwrap().database(),
        Some("app")
    );
    assert_eq!(
        ConnectionString::parse("mongodb://db/my%2Dapp?tls=true")
            .unwrap()
            .database(),
        Some("my-app")
    );
    assert_eq!(ConnectionString::parse("mongodb://db/").unwrap().database(), None);
    assert_eq!(
        ConnectionString::parse("mongodb://db/?tls=true")
            .unwrap()
            .database(),
        None
    );
    assert_eq!(ConnectionString::parse("mongodb://db").unwrap().database(), None);
}

#[test]
fn driver_options_keep_their_decoded_values_under_their_canonical_names() {
    let cs = ConnectionString::parse(
        "mongodb://db/?APPNAME=my%20app&maxPoolSize=3&authsource=admin&tlsCAFile=%2Fetc%2Fca.pem&appName=last",
    )
    .unwrap();
    assert_eq!(
        cs.driver_option("appname"),
        Some("last"),
        "the last one given wins"
    );
    assert_eq!(cs.driver_option("authSource"), Some("admin"));
    assert_eq!(cs.driver_option("tlscafile"), Some("/etc/ca.pem"));
    assert_eq!(
        cs.driver_option("maxPoolSize"),
        None,
        "a pool option is not a driver option"
    );
    assert_eq!(cs.driver_option("loadBalanced"), None);
    let names: Vec<&str> = cs.driver_options().map(|(name, _)| name).collect();
    assert_eq!(names, ["appName", "authSource", "tlsCAFile", "appName"]);
    assert_eq!(cs.driver_options().next(), Some(("appName", "my app")));
    // Values are not shown by `Debug`: a proxy password is one of them.
    let cs = ConnectionString::parse("mongodb://db/?proxyPassword=Qx7Zq9").unwrap();
    assert!(!format!("{cs:?}").contains("Qx7Zq9"));
    // A `%` that starts no escape, in a value.
    for bad in [
        "mongodb://db/?appName=100%",
        "mongodb://db/?appName=%zz",
        "mongodb://db/?appName=%+1",
    ] {
        assert!(
            matches!(
                ConnectionString::parse(bad).unwrap_err(),
                ConnectionStringError::Option { .. }
            ),
            "{bad}"
        );
    }
}
