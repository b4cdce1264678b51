//! The rules: what the observations mean. Pure: facts, policy, the previous sample and `now`
//! in, a verdict out. Nothing here reads a socket, a file or a clock, knows a flag, or
//! serializes; `architecture_rules_stay_pure` below fails the build's tests if it starts to.

pub mod advice;
pub mod cause;
pub mod check;
pub mod cidr;
pub mod connection;
pub mod consumer;
pub mod guard;
pub mod remembered;
pub mod subscription;

#[cfg(test)]
mod tests {
    /// The rules import only facts, config values and each other: never the observation
    /// layer, the command line, the report, a clock or an I/O API.
    #[test]
    fn architecture_rules_stay_pure() {
        let forbidden = [
            "crate::observe",
            "crate::cli",
            "crate::commands",
            "crate::report",
            "crate::deadline",
            "clap",
            "serde",
            "tokio",
            "async_nats",
            "libc",
            "nix::",
            "std::fs",
            "std::net::Tcp",
            "std::net::Udp",
            "std::io",
            "std::process",
            "std::env",
            "std::thread",
            "SystemTime",
            "Instant",
        ];
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/rules");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            // The check looks at the code, not at this test's own list.
            let code = match text.find("mod tests {\n    /// The rules import only") {
                Some(at) => &text[..at],
                None => &text,
            };
            for word in forbidden {
                assert!(
                    !code.contains(word),
                    "{} mentions `{word}`: the rules must stay pure (ARCHITECTURE.md)",
                    path.display()
                );
            }
            checked += 1;
        }
        assert!(checked >= 4, "read {checked} rule modules");
    }
}
