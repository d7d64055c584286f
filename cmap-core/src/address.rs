//! The endpoint a pool is for.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The address of the endpoint a pool serves: a host name, IP address or
/// Unix socket path, and a port where there is one.
///
/// Every event carries one, so cloning it must be cheap for every thread
/// at once: a host of up to 22 bytes (most host names and IPv4
/// addresses) is kept inline and cloned by copying, with no shared
/// reference count for concurrent events to contend on; a longer one is
/// shared.
#[derive(Clone)]
pub struct Address {
    host: Host,
    port: Option<u16>,
}

/// The longest host kept inline in an [`Address`].
const INLINE_HOST: usize = 22;

#[derive(Clone)]
enum Host {
    Inline { len: u8, bytes: [u8; INLINE_HOST] },
    Shared(Arc<str>),
}

impl Host {
    fn new(host: &str) -> Host {
        let len = host.len();
        if len > INLINE_HOST {
            return Host::Shared(host.into());
        }
        let mut bytes = [0; INLINE_HOST];
        bytes[..len].copy_from_slice(host.as_bytes());
        Host::Inline {
            len: len as u8, // at most INLINE_HOST
            bytes,
        }
    }

    fn as_str(&self) -> &str {
        match self {
            Host::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).expect("the bytes of a whole str, copied")
            }
            Host::Shared(host) => host,
        }
    }
}

impl Address {
    /// An address with a port (`host:port`).
    pub fn new(host: impl AsRef<str>, port: u16) -> Address {
        Address {
            host: Host::new(host.as_ref()),
            port: Some(port),
        }
    }

    /// An address with no port, such as a Unix domain socket path.
    pub fn unix(path: impl AsRef<str>) -> Address {
        Address {
            host: Host::new(path.as_ref()),
            port: None,
        }
    }

    /// The host name, IP address or socket path (`serverHost` in logs).
    pub fn host(&self) -> &str {
        self.host.as_str()
    }

    /// The port, when there is one (`serverPort` in logs).
    pub fn port(&self) -> Option<u16> {
        self.port
    }
}

impl PartialEq for Address {
    fn eq(&self, other: &Address) -> bool {
        self.port == other.port && self.host() == other.host()
    }
}

impl Eq for Address {}

impl Hash for Address {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.host().hash(state);
        self.port.hash(state);
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Address")
            .field("host", &self.host())
            .field("port", &self.port)
            .finish()
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{}", self.host(), port),
            None => f.write_str(self.host()),
        }
    }
}

impl std::str::FromStr for Address {
    type Err = std::num::ParseIntError;

    /// Parses `host:port`, `[v6]:port` or a bare host (port 27017, the
    /// MongoDB default), or a path starting with `/` (a Unix socket).
    fn from_str(s: &str) -> Result<Address, Self::Err> {
        if s.starts_with('/') {
            return Ok(Address::unix(s));
        }
        match s.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(':') => Ok(Address::new(host, port.parse()?)),
            _ => Ok(Address::new(s, 27017)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_displays() {
        let a: Address = "db.example:5432".parse().unwrap();
        assert_eq!((a.host(), a.port()), ("db.example", Some(5432)));
        assert_eq!(a.to_string(), "db.example:5432");
        let b: Address = "localhost".parse().unwrap();
        assert_eq!(b.port(), Some(27017));
        let c: Address = "/tmp/mongodb-27017.sock".parse().unwrap();
        assert_eq!(
            (c.port(), c.to_string().as_str()),
            (None, "/tmp/mongodb-27017.sock")
        );
        assert!("h:notaport".parse::<Address>().is_err());
    }

    #[test]
    fn short_and_long_hosts_read_back_and_compare_by_value() {
        let longest_inline = "a".repeat(INLINE_HOST);
        let shared = "b".repeat(INLINE_HOST + 1);
        for host in ["", "localhost", "é.example", &longest_inline, &shared] {
            let a = Address::new(host, 1);
            assert_eq!(a.host(), host);
            assert_eq!(a.clone(), Address::new(Arc::<str>::from(host), 1));
            assert_ne!(a, Address::new(host, 2));
            assert_ne!(a, Address::unix(host));
        }
        assert!(matches!(
            Address::new(&longest_inline, 1).host,
            Host::Inline { .. }
        ));
        assert!(matches!(Address::new(&shared, 1).host, Host::Shared(_)));
        let hash = |a: &Address| {
            use std::collections::hash_map::DefaultHasher;
            let mut h = DefaultHasher::new();
            a.hash(&mut h);
            h.finish()
        };
        assert_eq!(hash(&Address::new("db", 5432)), hash(&"db:5432".parse().unwrap()));
    }
}
