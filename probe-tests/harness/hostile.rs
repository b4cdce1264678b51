//! Hostile peers: listeners at the NATS port that misbehave in the ways a broken server, a
//! wrong address or a man in the middle can. Each connection gets its own thread; they stop
//! writing when the probe closes its end.

use super::NetNs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Accepts, and never speaks.
    Silent,
    /// Speaks binary garbage, then holds the connection.
    Garbage,
    /// `INFO {"x":"aaaa…` forever, as fast as the probe reads: a line without an end.
    EndlessInfo,
    /// `INFO {…}` a byte a second.
    Trickle,
    /// A NATS server that answers every request (JetStream, the connection list) with the
    /// given kind of answer.
    Answers(Reply),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// `MSG` declaring 4 GB of payload, then bytes as fast as the probe reads.
    Endless,
    /// 16 MiB of valid JSON (one long string).
    Huge,
    /// JSON nested a million levels deep.
    Deep,
    /// Not JSON.
    Malformed,
}

/// A hostile listener at `addr` in `ns`; runs until the test ends.
pub fn listen(ns: &NetNs, addr: &'static str, behaviour: Behaviour) -> u16 {
    let listener = ns.run(move || TcpListener::bind(addr).unwrap());
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { break };
            std::thread::spawn(move || {
                let _ = serve(conn, behaviour);
            });
        }
    });
    port
}

const INFO: &str = r#"INFO {"server_id":"NHOSTILE","server_name":"hostile","version":"2.10.26","proto":1,"go":"go1.22","host":"0.0.0.0","port":4222,"headers":true,"max_payload":1048576,"jetstream":true}"#;

fn serve(mut conn: TcpStream, behaviour: Behaviour) -> std::io::Result<()> {
    match behaviour {
        Behaviour::Silent => {
            let mut sink = [0u8; 4096];
            while conn.read(&mut sink)? > 0 {}
            Ok(())
        }
        Behaviour::Garbage => {
            let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect();
            conn.write_all(&garbage)?;
            let mut sink = [0u8; 4096];
            while conn.read(&mut sink)? > 0 {}
            Ok(())
        }
        Behaviour::EndlessInfo => {
            conn.write_all(br#"INFO {"server_id":""#)?;
            endless(&mut conn)
        }
        Behaviour::Trickle => {
            for b in INFO.bytes() {
                conn.write_all(&[b])?;
                std::thread::sleep(Duration::from_secs(1));
            }
            Ok(())
        }
        Behaviour::Answers(reply) => nats(conn, reply),
    }
}

fn repeated(out: &mut TcpStream, byte: u8, mut size: usize) -> std::io::Result<()> {
    let chunk = [byte; 64 * 1024];
    while size > 0 {
        let n = size.min(chunk.len());
        out.write_all(&chunk[..n])?;
        size -= n;
    }
    Ok(())
}

fn endless(conn: &mut TcpStream) -> std::io::Result<()> {
    let chunk = vec![b'a'; 64 * 1024];
    loop {
        conn.write_all(&chunk)?;
    }
}

/// Just enough of the NATS protocol to be asked a request: INFO, PONG, SUB, PUB/HPUB with a
/// reply subject answered on the subscription that matches it.
fn nats(conn: TcpStream, reply: Reply) -> std::io::Result<()> {
    let mut out = conn.try_clone()?;
    out.write_all(format!("{INFO}\r\n").as_bytes())?;
    let mut input = BufReader::new(conn);
    let mut subs: Vec<(String, String)> = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first().map(|w| w.to_ascii_uppercase()).as_deref() {
            Some("PING") => out.write_all(b"PONG\r\n")?,
            Some("SUB") if words.len() >= 3 => {
                subs.push((words[1].to_string(), words[words.len() - 1].to_string()))
            }
            Some(verb @ ("PUB" | "HPUB")) => {
                // PUB subject [reply] size; HPUB subject [reply] header-size total-size.
                let sizes = if verb == "PUB" { 1 } else { 2 };
                let total: usize = words.last().unwrap().parse().unwrap_or(0);
                let mut body = vec![0u8; total + 2];
                input.read_exact(&mut body)?;
                if words.len() == 2 + sizes + 1 {
                    let to = words[2];
                    if let Some((_, sid)) = subs.iter().find(|(s, _)| matches(s, to)) {
                        answer(&mut out, to, sid, reply)?;
                    }
                }
            }
            _ => {}
        }
    }
}

fn matches(pattern: &str, subject: &str) -> bool {
    let (p, s): (Vec<&str>, Vec<&str>) =
        (pattern.split('.').collect(), subject.split('.').collect());
    for (i, token) in p.iter().enumerate() {
        match *token {
            ">" => return s.len() > i,
            "*" if i < s.len() => {}
            t if s.get(i) == Some(&t) => {}
            _ => return false,
        }
    }
    p.len() == s.len()
}

fn answer(out: &mut TcpStream, to: &str, sid: &str, reply: Reply) -> std::io::Result<()> {
    match reply {
        Reply::Endless => {
            out.write_all(format!("MSG {to} {sid} 4000000000\r\n").as_bytes())?;
            out.write_all(b"{\"type\":\"")?;
            endless(out)
        }
        // Streamed, so this test process stays small (the probe's peak RSS is measured).
        Reply::Huge => {
            let size = 16 << 20;
            out.write_all(format!("MSG {to} {sid} {}\r\n", size + 12).as_bytes())?;
            out.write_all(b"{\"type\":\"")?;
            repeated(out, b'x', size)?;
            out.write_all(b"\"}\r\n")
        }
        Reply::Deep => {
            let size = 1_000_000;
            out.write_all(format!("MSG {to} {sid} {size}\r\n").as_bytes())?;
            repeated(out, b'[', size)?;
            out.write_all(b"\r\n")
        }
        Reply::Malformed => {
            let body = "{\"type\":\"io.nats.jetstream.api.v1.consumer_info_response\",\"num_pending\":-1e999,";
            out.write_all(format!("MSG {to} {sid} {}\r\n", body.len()).as_bytes())?;
            out.write_all(body.as_bytes())?;
            out.write_all(b"\r\n")
        }
    }
}
