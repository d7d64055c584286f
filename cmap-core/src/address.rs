//! The endpoint a pool is for.

use std::fmt;
use std::sync::Arc;

/// The address of the endpoint a pool serves: a host name, IP address or
/// Unix socket path, and a port where there is one. Cheap to clone, since
/// every event carries it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Address {
    host: Arc<str>,
    port: Option<u16>,
}

impl Address {
    /// An address with a port (`host:port`).
    pub fn new(host: impl Into<Arc<str>>, port: u16) -> Address {
        Address {
            host: host.into(),
            port: Some(port),
        }
    }

    /// An address with no port, such as a Unix domain socket path.
    pub fn unix(path: impl Into<Arc<str>>) -> Address {
        Address {
            host: path.into(),
            port: None,
        }
    }

    /// The host name, IP address or socket path (`serverHost` in logs).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port, when there is one (`serverPort` in logs).
    pub fn port(&self) -> Option<u16> {
        self.port
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{}", self.host, port),
            None => f.write_str(&self.host),
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
}
