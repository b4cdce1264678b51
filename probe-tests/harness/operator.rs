//! Operator mode, as production NATS runs it: an operator, a system account, an account with
//! JetStream, and a user's creds file (JWT and seed), signed here with nkeys.

use std::path::PathBuf;

pub struct OperatorMode {
    /// The server's configuration (`nats-server -c`).
    pub config: PathBuf,
    /// The user's creds file, readable by anyone (pods run the probe as another user).
    pub creds: PathBuf,
    pub seed: String,
    pub user_jwt: String,
    _dir: tempfile::TempDir,
}

impl OperatorMode {
    pub fn new() -> OperatorMode {
        let (operator, account, user) = (
            nkeys::KeyPair::new_operator(),
            nkeys::KeyPair::new_account(),
            nkeys::KeyPair::new_user(),
        );
        // Operator mode runs JetStream only with a system account.
        let system = nkeys::KeyPair::new_account();
        let operator_jwt = jwt(
            &operator,
            &operator.public_key(),
            "op",
            serde_json::json!({"type": "operator", "version": 2, "system_account": system.public_key()}),
        );
        let system_jwt = jwt(
            &operator,
            &system.public_key(),
            "SYS",
            serde_json::json!({"type": "account", "version": 2}),
        );
        let limits = serde_json::json!({
            "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": true, "conn": -1, "leaf": -1,
            "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1,
        });
        let account_jwt = jwt(
            &operator,
            &account.public_key(),
            "acc",
            serde_json::json!({"limits": limits, "type": "account", "version": 2}),
        );
        let user_jwt = jwt(
            &account,
            &user.public_key(),
            "u",
            serde_json::json!({"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1, "type": "user", "version": 2}),
        );
        let seed = user.seed().unwrap();
        let dir = tempfile::tempdir().unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let config = dir.path().join("operator.conf");
        std::fs::write(
            &config,
            format!(
                "operator: \"{operator_jwt}\"\nsystem_account: {sys}\nresolver: MEMORY\nresolver_preload: {{\n  {sys}: \"{system_jwt}\"\n  {acc}: \"{account_jwt}\"\n}}\n",
                sys = system.public_key(),
                acc = account.public_key()
            ),
        )
        .unwrap();
        let creds = dir.path().join("user.creds");
        std::fs::write(
            &creds,
            format!(
                "-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o644)).unwrap();
        OperatorMode {
            config,
            creds,
            seed,
            user_jwt,
            _dir: dir,
        }
    }
}

/// A JWT as nats-io/jwt v2 writes one: `header.claims.signature`, base64url without padding,
/// signed by `issuer` with ed25519.
fn jwt(issuer: &nkeys::KeyPair, subject: &str, name: &str, nats: serde_json::Value) -> String {
    jwt_for(issuer, subject, name, None, nats)
}

/// `jwt`, with an audience (`aud`).
pub fn jwt_for(
    issuer: &nkeys::KeyPair,
    subject: &str,
    name: &str,
    aud: Option<&str>,
    nats: serde_json::Value,
) -> String {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut claims = serde_json::json!({
        "jti": format!("NATSPROBETEST{now}{name}").to_uppercase(),
        "iat": now,
        "iss": issuer.public_key(),
        "name": name,
        "sub": subject,
        "nats": nats,
    });
    if let Some(aud) = aud {
        claims["aud"] = aud.into();
    }
    let header = URL_SAFE_NO_PAD.encode(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let signed = format!("{header}.{}", URL_SAFE_NO_PAD.encode(claims.to_string()));
    let signature = issuer.sign(signed.as_bytes()).unwrap();
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature))
}
