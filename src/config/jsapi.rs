//! Where the JetStream API is: the connected server's own domain (`$JS.API`), another
//! JetStream domain (`$JS.<domain>.API`, e.g. the hub's from a leaf node) or an API prefix
//! imported from another account. Every JetStream subject the probe sends is built here.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum JsApi {
    /// The connected server's own JetStream: `$JS.API`.
    #[default]
    Local,
    /// A JetStream domain: `$JS.<domain>.API`, which nats-server maps to the domain's API
    /// across leaf node connections (leafnode.go, `generateJSMappingTable`).
    Domain(String),
    /// An API prefix (an account import), without its trailing `.`.
    Prefix(String),
}

impl JsApi {
    /// A domain: one subject token (nats.go's `nats.Domain` rejects the same).
    pub fn domain(text: &str) -> Result<JsApi, &'static str> {
        let text = text.trim();
        if text.is_empty() {
            return Err("empty");
        }
        if text.contains(|c: char| c.is_whitespace() || ".*>".contains(c)) {
            return Err("a domain is one subject token: no whitespace, '.', '*' or '>'");
        }
        Ok(JsApi::Domain(text.to_string()))
    }

    /// A prefix: a literal subject (one trailing `.` is allowed and dropped).
    pub fn prefix(text: &str) -> Result<JsApi, &'static str> {
        let text = text.trim();
        let text = text.strip_suffix('.').unwrap_or(text);
        if text.is_empty() {
            return Err("empty");
        }
        let literal =
            |t: &str| !t.is_empty() && !t.contains(|c: char| c.is_whitespace() || "*>".contains(c));
        if !text.split('.').all(literal) {
            return Err(
                "a prefix is a literal subject: no whitespace, no empty token, no '*' or '>'",
            );
        }
        Ok(JsApi::Prefix(text.to_string()))
    }

    /// The API's subject prefix, without a trailing `.`.
    pub fn base(&self) -> String {
        match self {
            JsApi::Local => "$JS.API".into(),
            JsApi::Domain(d) => format!("$JS.{d}.API"),
            JsApi::Prefix(p) => p.clone(),
        }
    }

    /// The subject of one API call: `subject("CONSUMER.INFO.S.D")`.
    pub fn subject(&self, call: &str) -> String {
        format!("{}.{call}", self.base())
    }

    /// The domain named, if one was.
    pub fn named_domain(&self) -> Option<&str> {
        match self {
            JsApi::Domain(d) => Some(d),
            _ => None,
        }
    }

    pub fn is_local(&self) -> bool {
        *self == JsApi::Local
    }
}

impl fmt::Display for JsApi {
    /// As a person reads it: `JetStream domain hub ($JS.hub.API)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsApi::Local => f.write_str("the server's own JetStream domain ($JS.API)"),
            JsApi::Domain(d) => write!(f, "JetStream domain {d} ($JS.{d}.API)"),
            JsApi::Prefix(p) => write!(f, "JetStream API prefix {p}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_carry_the_domain_or_the_prefix() {
        let call = "CONSUMER.INFO.TF_RAW.kv";
        assert_eq!(
            JsApi::Local.subject(call),
            "$JS.API.CONSUMER.INFO.TF_RAW.kv"
        );
        assert_eq!(
            JsApi::domain("hub").unwrap().subject(call),
            "$JS.hub.API.CONSUMER.INFO.TF_RAW.kv"
        );
        assert_eq!(
            JsApi::prefix("JS.acc.API").unwrap().subject("STREAM.LIST"),
            "JS.acc.API.STREAM.LIST"
        );
        assert_eq!(
            JsApi::prefix("JS.acc.API.").unwrap(),
            JsApi::prefix("JS.acc.API").unwrap(),
            "one trailing dot is dropped, as nats.go's APIPrefix adds one"
        );
    }

    #[test]
    fn bad_domains_and_prefixes_are_refused() {
        for bad in ["", " ", "a b", "hub.x", "h*", ">", "a\tb"] {
            assert!(JsApi::domain(bad).is_err(), "domain {bad:?}");
        }
        for bad in ["", ".", "a..b", ".a", "a.*", "a.>", "a b", "x.>.y"] {
            assert!(JsApi::prefix(bad).is_err(), "prefix {bad:?}");
        }
        assert_eq!(JsApi::domain(" hub ").unwrap(), JsApi::Domain("hub".into()));
    }
}
