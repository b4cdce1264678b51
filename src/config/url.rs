//! NATS server URLs as the nats CLI takes them: `nats://[user[:pass]@]host[:port]`, `tls://`,
//! or a bare `host[:port]`, comma-separated. The userinfo is kept for authenticating and never
//! shown: `Display` and `Debug` leave it out, and no error message quotes the input.

use std::fmt;

pub const DEFAULT_PORT: u16 = 4222;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Nats,
    Tls,
}

/// One server URL. `Display` never shows the userinfo.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerUrl {
    pub scheme: Scheme,
    /// Host name or IP address, without IPv6 brackets.
    pub host: String,
    pub port: u16,
    /// `user:password` or a token, percent-encoded as given.
    pub userinfo: Option<String>,
}

impl fmt::Display for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.scheme {
            Scheme::Nats => "nats",
            Scheme::Tls => "tls",
        };
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Debug for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Debug output ends up in panics and logs too: same rule as Display.
        write!(f, "ServerUrl({self})")
    }
}

/// A comma-separated list, as `NATS_URL` and the nats CLI take it. Messages never quote
/// the input: it may carry a password.
pub fn parse_list(text: &str) -> Result<Vec<ServerUrl>, String> {
    let urls: Vec<ServerUrl> = text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .enumerate()
        .map(|(i, s)| parse(s).map_err(|e| format!("URL {}: {e}", i + 1)))
        .collect::<Result<_, _>>()?;
    if urls.is_empty() {
        return Err("no URL given".into());
    }
    Ok(urls)
}

/// `nats://[user[:pass]@]host[:port]`, `tls://...`, or a bare `host[:port]`.
pub fn parse(text: &str) -> Result<ServerUrl, String> {
    let (scheme, rest) = match text.split_once("://") {
        Some(("nats", rest)) => (Scheme::Nats, rest),
        Some(("tls", rest)) => (Scheme::Tls, rest),
        Some((other, _)) if other.chars().all(|c| c.is_ascii_alphanumeric()) => {
            return Err(format!(
                "scheme '{other}' is not supported (use nats:// or tls://)"
            ))
        }
        Some(_) => return Err("malformed scheme".into()),
        None => (Scheme::Nats, text),
    };
    let rest = rest.trim_end_matches('/');
    if rest.contains(['/', '?', '#']) {
        return Err("a server URL has no path, query or fragment".into());
    }
    let (userinfo, hostport) = match rest.rsplit_once('@') {
        Some((user, hostport)) if !user.is_empty() => (Some(user.to_string()), hostport),
        Some(_) => return Err("empty userinfo before '@'".into()),
        None => (None, rest),
    };
    let (host, port) = split_host_port(hostport, DEFAULT_PORT)?;
    Ok(ServerUrl {
        scheme,
        host,
        port,
        userinfo,
    })
}

fn split_host_port(text: &str, default: u16) -> Result<(String, u16), String> {
    let port = |p: &str| -> Result<u16, String> {
        p.parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| "the port must be a number from 1 to 65535".to_string())
    };
    if let Some(bracketed) = text.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or("unclosed '[' in the host")?;
        host.parse::<std::net::Ipv6Addr>()
            .map_err(|_| "not an IPv6 address in [...]")?;
        return match after {
            "" => Ok((host.to_string(), default)),
            _ => Ok((
                host.to_string(),
                port(after.strip_prefix(':').ok_or("junk after ']'")?)?,
            )),
        };
    }
    let (host, number) = match text.rsplit_once(':') {
        // A bare IPv6 address has colons but no port.
        Some(_) if text.parse::<std::net::Ipv6Addr>().is_ok() => (text, default),
        Some((host, p)) => (host, port(p)?),
        None => (text, default),
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    Ok((host.to_string(), number))
}

/// `--monitor`: a server's HTTP monitoring endpoint, `http://host[:port]` (8222 by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonitorUrl {
    pub host: String,
    pub port: u16,
}

impl fmt::Display for MonitorUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.host.contains(':') {
            true => write!(f, "http://[{}]:{}", self.host, self.port),
            false => write!(f, "http://{}:{}", self.host, self.port),
        }
    }
}

pub const DEFAULT_MONITOR_PORT: u16 = 8222;

/// `http://host[:port]`; https is not spoken (the probe carries no HTTP TLS).
pub fn parse_monitor(text: &str) -> Result<MonitorUrl, String> {
    let rest = match text.trim().split_once("://") {
        Some(("http", rest)) => rest,
        Some((other, _)) => {
            return Err(format!(
                "scheme '{other}' is not supported (use http://host:8222)"
            ))
        }
        None => text.trim(),
    };
    let rest = rest.trim_end_matches('/');
    if rest.contains(['/', '?', '#', '@']) {
        return Err("a monitoring URL is http://host[:port], without a path or credentials".into());
    }
    let (host, port) = split_host_port(rest, DEFAULT_MONITOR_PORT)?;
    Ok(MonitorUrl { host, port })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_nats_cli_takes() {
        let cases = [
            ("nats://10.96.14.2:4222", "nats://10.96.14.2:4222"),
            ("nats://nats.nats.svc", "nats://nats.nats.svc:4222"),
            ("tls://nats:4443", "tls://nats:4443"),
            ("nats:4333", "nats://nats:4333"),
            ("nats", "nats://nats:4222"),
            ("nats://[::1]:4222", "nats://[::1]:4222"),
            ("nats://[fd00::a]", "nats://[fd00::a]:4222"),
            ("::1", "nats://[::1]:4222"),
            ("nats://alice:s3cret@nats:4222/", "nats://nats:4222"),
            ("nats://t0ken@nats", "nats://nats:4222"),
        ];
        for (text, shown) in cases {
            assert_eq!(parse(text).unwrap().to_string(), shown, "{text}");
        }
        let url = parse("nats://alice:s3cret@nats:4222").unwrap();
        assert_eq!(url.userinfo.as_deref(), Some("alice:s3cret"));
        assert!(!format!("{url:?}").contains("s3cret"));
    }

    #[test]
    fn monitoring_urls() {
        assert_eq!(
            parse_monitor("http://nats:8222").unwrap().to_string(),
            "http://nats:8222"
        );
        assert_eq!(parse_monitor("nats").unwrap().port, 8222);
        // A bare IPv6 address has no port, whatever its last group.
        assert_eq!(parse_monitor("fd00::4222").unwrap().port, 8222);
        assert_eq!(parse_monitor("[fd00::1]").unwrap().port, 8222);
        assert_eq!(
            parse_monitor("http://[::1]:9000/").unwrap().to_string(),
            "http://[::1]:9000"
        );
        assert!(parse_monitor("https://nats:8222").is_err());
        assert!(parse_monitor("http://nats:8222/connz").is_err());
    }

    #[test]
    fn lists_are_comma_separated() {
        let urls = parse_list("nats://a:4222, nats://b:4223,").unwrap();
        assert_eq!(
            urls.iter().map(|u| u.port).collect::<Vec<_>>(),
            [4222, 4223]
        );
        assert!(parse_list(" , ").is_err());
    }

    #[test]
    fn errors_never_quote_the_url() {
        for bad in [
            "nats://alice:s3cret@nats:99999",
            "nats://alice:s3cret@nats:0",
            "ws://alice:s3cret@nats",
            "nats://alice:s3cret@",
            "nats://alice:s3cret@nats/path",
            "nats://alice:s3cret@[::1",
            "nats://alice:s3cret@[nats]:4222",
            "nats://:s3cret@nats:x",
        ] {
            let err = parse_list(bad).unwrap_err();
            assert!(
                !err.contains("s3cret") && !err.contains("alice"),
                "{bad}: {err}"
            );
        }
        assert!(parse("ws://nats").unwrap_err().contains("'ws'"));
    }
}
