//! How the probe authenticates to NATS, as the nats CLI would. Secrets print as `***`
//! however they are formatted: the kubelet stores probe output in events.

use std::fmt;
use std::path::PathBuf;

/// A secret from a flag or the environment.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Auth {
    pub creds: Option<PathBuf>,
    pub nkey: Option<PathBuf>,
    pub user: Option<String>,
    pub password: Option<Secret>,
    pub token: Option<Secret>,
    pub tls_ca: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_format() {
        let auth = Auth {
            password: Some(Secret("s3cret".into())),
            token: Some(Secret("t0ken".into())),
            ..Auth::default()
        };
        let shown = format!("{auth:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("t0ken"),
            "{shown}"
        );
    }
}
