//! How every command reaches NATS: the servers (`--server`, else NATS_URL), where the
//! JetStream API is (`--js-domain`, `--js-api-prefix`), and the authentication flags (each
//! else the nats CLI's NATS_* variable).

use crate::config::{self, Auth, JsApi, Secret};
use crate::error::Error;
use clap::Args;
use std::path::PathBuf;

/// `--server` (comma-separated or repeated), else the nats CLI's NATS_URL. Messages never
/// quote the input: it may carry a password.
pub(super) fn servers(
    given: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<config::ServerUrl>, Error> {
    if !given.is_empty() {
        config::parse_url_list(&given.join(","))
            .map_err(|e| Error::Usage(format!("--server (or NATSPROBE_SERVER): {e}")))
    } else if let Some(url) = env("NATS_URL").filter(|u| !u.trim().is_empty()) {
        config::parse_url_list(&url).map_err(|e| Error::Usage(format!("NATS_URL: {e}")))
    } else {
        Ok(Vec::new())
    }
}

/// `what` given without a server: `why` it needs one.
pub(super) fn no_server(what: &str, why: &str) -> Error {
    Error::Usage(format!("{what} needs --server (or NATS_URL): {why}"))
}

/// Where the JetStream API is, shared by every command that asks JetStream (the nats CLI's
/// names).
#[derive(Debug, Args)]
#[command(next_help_heading = "JetStream")]
pub struct JsArgs {
    /// The JetStream domain the streams live in, e.g. the hub's from a pod connected to a
    /// leaf node: requests go to $JS.<NAME>.API
    #[arg(long, value_name = "NAME")]
    pub js_domain: Option<String>,

    /// The JetStream API prefix imported from another account (instead of $JS.API)
    #[arg(long, value_name = "PREFIX")]
    pub js_api_prefix: Option<String>,
}

impl JsArgs {
    /// One of the two at most; an empty value (an unset variable in a manifest) is none.
    pub(super) fn validate(&self) -> Result<JsApi, Error> {
        let given = |v: &Option<String>| v.clone().filter(|v| !v.trim().is_empty());
        match (given(&self.js_domain), given(&self.js_api_prefix)) {
            (Some(_), Some(_)) => Err(Error::Usage(
                "--js-domain and --js-api-prefix both given (also via NATSPROBE_JS_DOMAIN/NATSPROBE_JS_API_PREFIX): a domain is a prefix ($JS.<domain>.API), choose one".into(),
            )),
            (Some(d), None) => JsApi::domain(&d).map_err(|e| {
                Error::Usage(format!("--js-domain (or NATSPROBE_JS_DOMAIN) '{d}': {e}"))
            }),
            (None, Some(p)) => JsApi::prefix(&p).map_err(|e| {
                Error::Usage(format!(
                    "--js-api-prefix (or NATSPROBE_JS_API_PREFIX) '{p}': {e}"
                ))
            }),
            (None, None) => Ok(JsApi::Local),
        }
    }
}

/// The NATS authentication flags, shared by every command that connects.
#[derive(Debug, Args)]
#[command(next_help_heading = "NATS authentication")]
pub struct AuthArgs {
    /// Credentials file (JWT and nkey seed) (else NATS_CREDS)
    #[arg(long, value_name = "FILE")]
    pub creds: Option<PathBuf>,

    /// Nkey seed file (else NATS_NKEY)
    #[arg(long, value_name = "FILE")]
    pub nkey: Option<PathBuf>,

    /// User name (else NATS_USER)
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,

    /// Password, with --user (else NATS_PASSWORD)
    #[arg(long, value_name = "SECRET")]
    pub password: Option<String>,

    /// Token (else NATS_TOKEN)
    #[arg(long, value_name = "SECRET")]
    pub token: Option<String>,

    /// CA certificate(s) to verify the server with (PEM) (else NATS_CA)
    #[arg(long, value_name = "FILE")]
    pub tlsca: Option<PathBuf>,

    /// Client certificate (PEM), with --tlskey (else NATS_CERT)
    #[arg(long, value_name = "FILE")]
    pub tlscert: Option<PathBuf>,

    /// Client certificate's private key (PEM) (else NATS_KEY)
    #[arg(long, value_name = "FILE")]
    pub tlskey: Option<PathBuf>,
}

/// Flags (and their NATSPROBE_* twins) first, then the nats CLI's NATS_* variables. One way
/// to authenticate at most; a password needs a user and a client certificate its key.
pub(super) fn auth(args: AuthArgs, env: &dyn Fn(&str) -> Option<String>) -> Result<Auth, Error> {
    let text =
        |given: Option<String>, name: &str| given.or_else(|| env(name)).filter(|v| !v.is_empty());
    let path = |given: Option<PathBuf>, name: &str| {
        given.or_else(|| env(name).filter(|v| !v.is_empty()).map(PathBuf::from))
    };
    let auth = Auth {
        creds: path(args.creds, "NATS_CREDS"),
        nkey: path(args.nkey, "NATS_NKEY"),
        user: text(args.user, "NATS_USER"),
        password: text(args.password, "NATS_PASSWORD").map(Secret),
        token: text(args.token, "NATS_TOKEN").map(Secret),
        tls_ca: path(args.tlsca, "NATS_CA"),
        tls_cert: path(args.tlscert, "NATS_CERT"),
        tls_key: path(args.tlskey, "NATS_KEY"),
    };
    let ways = [
        auth.creds.is_some(),
        auth.nkey.is_some(),
        auth.user.is_some(),
        auth.token.is_some(),
    ];
    if ways.iter().filter(|&&w| w).count() > 1 {
        return Err(Error::Usage(
            "more than one way to authenticate (--creds, --nkey, --user, --token, or their NATS_* variables): choose one".into(),
        ));
    }
    if auth.password.is_some() != auth.user.is_some() {
        return Err(Error::Usage(
            "--user and --password (or NATS_USER and NATS_PASSWORD) go together".into(),
        ));
    }
    if auth.tls_cert.is_some() != auth.tls_key.is_some() {
        return Err(Error::Usage(
            "--tlscert and --tlskey (or NATS_CERT and NATS_KEY) go together".into(),
        ));
    }
    Ok(auth)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::check::tests::{parse, parse_env};
    use crate::cli::guard::tests::guard;

    #[test]
    fn server_errors_never_show_credentials() {
        let err = parse(&["natsprobe", "--server", "nats://u:s3cret@nats:0"]).unwrap_err();
        assert!(
            err.starts_with("--server") && !err.contains("s3cret"),
            "{err}"
        );
        let err = parse_env(&["natsprobe"], &[("NATS_URL", "ws://u:s3cret@nats")]).unwrap_err();
        assert!(
            err.starts_with("NATS_URL") && !err.contains("s3cret"),
            "{err}"
        );
        let err = parse(&["natsprobe", "--when-server-down", "fail"]).unwrap_err();
        assert!(err.contains("--when-server-down needs --server"), "{err}");
    }

    #[test]
    fn auth_from_flags_then_the_nats_cli_variables() {
        let c = parse_env(
            &["natsprobe"],
            &[
                ("NATS_USER", "u"),
                ("NATS_PASSWORD", "p"),
                ("NATS_CA", "/ca.pem"),
            ],
        )
        .unwrap();
        assert_eq!(c.auth.user.as_deref(), Some("u"));
        assert_eq!(c.auth.password, Some(Secret("p".into())));
        assert_eq!(c.auth.tls_ca, Some(PathBuf::from("/ca.pem")));
        let c = parse_env(&["natsprobe", "--token", "t"], &[("NATS_TOKEN", "other")]).unwrap();
        assert_eq!(c.auth.token, Some(Secret("t".into())), "the flag wins");
        let c = parse_env(
            &["natsprobe"],
            &[("NATS_CREDS", "/u.creds"), ("NATS_NKEY", "")],
        )
        .unwrap();
        assert_eq!(c.auth.creds, Some(PathBuf::from("/u.creds")));
        type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
        let cases: [Case; 4] = [
            (
                &[
                    "natsprobe",
                    "--token",
                    "t",
                    "--user",
                    "u",
                    "--password",
                    "p",
                ],
                &[],
                "one way",
            ),
            (
                &["natsprobe", "--creds", "/c"],
                &[("NATS_TOKEN", "t")],
                "one way",
            ),
            (&["natsprobe", "--password", "p"], &[], "go together"),
            (
                &["natsprobe", "--tlscert", "/c.pem"],
                &[],
                "--tlscert and --tlskey",
            ),
        ];
        for (args, env, fragment) in cases {
            let err = parse_env(args, env).unwrap_err();
            assert!(err.contains(fragment), "{args:?} {env:?}: {err}");
            assert!(!err.contains("\"t\"") && !err.contains(" p "), "{err}");
        }
    }

    #[test]
    fn a_jetstream_domain_or_prefix_from_flags_or_their_variables() {
        let c = parse(&[
            "natsprobe",
            "--server",
            "n",
            "--consumer",
            "S/D",
            "--js-domain",
            "hub",
        ])
        .unwrap();
        assert_eq!(c.js_api, JsApi::Domain("hub".into()));
        let c = parse_env(&["natsprobe", "--server", "n", "--consumer", "S/D"], &[]).unwrap();
        assert_eq!(c.js_api, JsApi::Local, "no domain: the server's own");
        let c = parse(&["natsprobe", "--js-api-prefix", "JS.hub.API."]).unwrap();
        assert_eq!(c.js_api, JsApi::Prefix("JS.hub.API".into()));
        let g = guard(
            &["natsprobe", "guard", "--server", "n", "--js-domain", "hub"],
            &[],
        )
        .unwrap();
        assert_eq!(g.js_api.subject("STREAM.LIST"), "$JS.hub.API.STREAM.LIST");
        for (args, fragment) in [
            (
                &[
                    "natsprobe",
                    "--js-domain",
                    "hub",
                    "--js-api-prefix",
                    "X.API",
                ][..],
                "--js-domain and --js-api-prefix both given",
            ),
            (&["natsprobe", "--js-domain", "my hub"], "--js-domain"),
            (&["natsprobe", "--js-domain", "hub.eu"], "--js-domain"),
            (&["natsprobe", "--js-domain", "*"], "--js-domain"),
            (&["natsprobe", "--js-domain", ">"], "--js-domain"),
            (
                &["natsprobe", "--js-api-prefix", "X.*.API"],
                "--js-api-prefix",
            ),
            (
                &["natsprobe", "--js-api-prefix", "X..API"],
                "--js-api-prefix",
            ),
        ] {
            let err = parse(args).expect_err(&format!("{args:?} should fail"));
            assert!(err.contains(fragment), "{args:?}: {err}");
        }
        let err = guard(
            &["natsprobe", "guard", "--server", "n", "--js-domain", "a.b"],
            &[],
        )
        .unwrap_err();
        assert!(err.contains("--js-domain"), "{err}");
    }

    /// clap reads the twins from the process environment (the end-to-end tests set them);
    /// here: they are wired, and an empty one (an unset value in a manifest) is no domain.
    #[test]
    fn the_jetstream_flags_read_their_environment_twins() {
        let command = crate::cli::command();
        let check = command
            .get_subcommands()
            .find(|s| s.get_name() == "check")
            .unwrap();
        let env_of = |long: &str| {
            check
                .get_arguments()
                .find(|a| a.get_long() == Some(long))
                .and_then(|a| a.get_env())
                .map(|e| e.to_string_lossy().to_string())
        };
        assert_eq!(env_of("js-domain").as_deref(), Some("NATSPROBE_JS_DOMAIN"));
        assert_eq!(
            env_of("js-api-prefix").as_deref(),
            Some("NATSPROBE_JS_API_PREFIX")
        );
        let empty = JsArgs {
            js_domain: Some(String::new()),
            js_api_prefix: Some(" ".into()),
        };
        assert_eq!(
            empty.validate().unwrap(),
            JsApi::Local,
            "an empty variable in a manifest is no domain"
        );
    }
}
