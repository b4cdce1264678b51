//! The fuzzing entry points: every decoder of outside input, as `cargo fuzz` runs them
//! (`fuzz/fuzz_targets/`). Built only for the fuzzer (`--cfg fuzzing`) and the tests, which run
//! every input in `fuzz/regressions/` through them: a crashing input, once found, stays a test.
//! Each must return, whatever the bytes: no panic, no unbounded allocation, no quadratic time.

use crate::observe::{connz, jetstream, server, sockets, state};

/// `/proc/net/tcp{,6}`, with and without a port filter.
pub fn proc_net_tcp(data: &[u8]) {
    for ports in [&[][..], &[4222][..]] {
        let mut out = Vec::new();
        let _ = sockets::procnet::parse(data, ports, &mut out);
    }
}

/// A sock_diag datagram: netlink headers, inet_diag_msg, attributes, tcp_info.
pub fn netlink(data: &[u8]) {
    let mut out = Vec::new();
    for seq in [1, 2] {
        let _ = sockets::netlink::parse_messages(data, seq, &mut out);
    }
}

/// The first bytes a server sends (`INFO {...}`).
pub fn info_line(data: &[u8]) {
    let _ = server::decode_info(data);
}

/// Every JetStream API answer and advisory the probe and the guard decode.
pub fn jetstream(data: &[u8]) {
    let _ = jetstream::parse_consumer_info(data);
    let _ = jetstream::parse_stream_info(data);
    let _ = jetstream::parse_stream_names(data);
    let _ = jetstream::parse_consumer_list(data);
    let _ = jetstream::parse_advisory(data);
    let _ = jetstream::parse_account_domain(data);
    let _ = jetstream::is_temporarily_unavailable(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = jetstream::parse_time(text);
    }
}

/// The account's connection report and STATZ, and the monitoring port's `/connz`.
pub fn connz(data: &[u8]) {
    let _ = connz::parse::parse_statz(data);
    let _ = connz::parse::parse_envelope(data, true);
    let _ = connz::parse::parse_envelope(data, false);
    let _ = connz::parse::parse_leafz(data);
    let _ = connz::parse::parse_connz(data, "http://fuzz:8222");
}

/// A state file, as another run (or anyone who could write the dir) left it.
pub fn state_file(data: &[u8]) {
    let key = state::Key {
        server: "nats://nats:4222".into(),
        of: "ports 4222 anyone netns own consumers S/D subscriptions ".into(),
    };
    let _ = state::decode(data, &key);
}

/// Server URLs (`--server`, `NATS_URL`), the monitoring URL, durations.
pub fn settings(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = crate::config::url::parse(text);
    let _ = crate::config::url::parse_list(text);
    let _ = crate::config::url::parse_monitor(text);
    let _ = crate::config::duration::parse(text);
}

/// A fuzzing entry point.
pub type Target = fn(&[u8]);

/// The targets by name, as `fuzz/fuzz_targets/` and `fuzz/regressions/` name them.
pub const TARGETS: &[(&str, Target)] = &[
    ("proc_net_tcp", proc_net_tcp),
    ("netlink", netlink),
    ("info_line", info_line),
    ("jetstream", jetstream),
    ("connz", connz),
    ("state_file", state_file),
    ("settings", settings),
];

#[cfg(test)]
mod tests {
    use super::TARGETS;
    use std::path::Path;

    /// Every input the fuzzer ever found trouble with, and the seeds, still pass through.
    #[test]
    fn regressions_and_seeds_pass_through_every_target() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
        let mut ran = 0;
        for (name, target) in TARGETS {
            for dir in ["regressions", "seeds"] {
                let Ok(entries) = std::fs::read_dir(root.join(dir).join(name)) else {
                    continue;
                };
                for entry in entries {
                    let data = std::fs::read(entry.unwrap().path()).unwrap();
                    target(&data);
                    ran += 1;
                }
            }
        }
        assert!(ran >= TARGETS.len(), "the seeds are missing: {ran} inputs");
    }

    /// Pathological shapes, beyond what a short fuzzing run reaches: each returns.
    #[test]
    fn pathological_inputs_return() {
        let deep = "[".repeat(100_000);
        let long_line = vec![b'A'; 4 << 20];
        let many_lines = "0: x\n".repeat(200_000);
        let huge_len = [0xffu8; 64];
        for (_, target) in TARGETS {
            for data in [
                deep.as_bytes(),
                &long_line[..],
                many_lines.as_bytes(),
                &huge_len[..],
                b"",
                b"INFO ",
            ] {
                target(data);
            }
        }
    }

    /// The names are the fuzzer's: each target's file in `fuzz/fuzz_targets/` runs it.
    #[test]
    fn every_target_has_its_fuzz_target_file() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/fuzz_targets");
        for (name, _) in TARGETS {
            let file = dir.join(format!("{name}.rs"));
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            assert!(
                text.contains(&format!("natsprobe::fuzz::{name}(data)")),
                "{} does not run natsprobe::fuzz::{name}",
                file.display()
            );
        }
    }
}
