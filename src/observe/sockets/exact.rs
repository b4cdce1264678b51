//! The exact question: sock_diag asked for one socket by its full `inet_diag_sockid` (both
//! addresses and ports, the bound interface, the cookie), not for a dump. The kernel answers
//! with one hash lookup (`inet_diag_cmd_exact` → `inet_diag_find_one_icsk`) in the asking
//! socket's network namespace, so the cost does not grow with the node: every namespace shares
//! one TCP established hash unless the node sets `net.ipv4.tcp_child_ehash_entries`, and a
//! dump walks all of its buckets (262,144 on a 24 GiB node) to find a pod's few sockets.
//!
//! What the kernel answers (net/ipv4/inet_diag.c; each seen on Linux 6.18): one message and no
//! `NLMSG_DONE`; no such socket is `NLMSG_ERROR` −ENOENT, and so is a socket that reuses the
//! addresses under another cookie. Without an established socket the lookup falls back to the
//! listener (state LISTEN), and a TIME_WAIT socket keeps its parent's cookie with inode 0: an
//! answer is only what the kernel found under that name, and the rules (`rules::exact`) say
//! whether it is the same connection. An AF_INET6 socket with IPv4-mapped addresses is found
//! by either family.

use super::netlink::{
    self, parse_diag_msg, DumpError, INFO_EXT, NLMSG_ERROR, NLMSG_HDR_LEN, NLM_F_REQUEST,
    SOCK_DIAG_BY_FAMILY,
};
use crate::facts::{KnownSocket, Socket};
use natsprobe_core::timing::EXACT_PATIENCE as PATIENCE;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::time::Instant;

/// nlmsghdr and inet_diag_req_v2: family, protocol, ext, pad, states, sockid.
const REQUEST_LEN: usize = NLMSG_HDR_LEN + 56;
/// Sequence numbers start here; an answer names its request's.
const FIRST_SEQ: u32 = 1;
/// Questions per datagram: their answers (a few hundred bytes each) must fit in the socket's
/// receive buffer, or the kernel drops them.
const BATCH: usize = 32;

/// Asks the kernel for each of `known` by its exact identity, a datagram of questions at a
/// time, in the namespace of `netns_of` (or ours). Each answer in order: the socket found under
/// that name, or None when there is none. `Err`: why the questions could not be asked or
/// answered (the caller walks the table instead, and learns there why).
pub fn look_up(
    known: &[KnownSocket],
    netns_of: Option<u32>,
    info: bool,
    deadline: Instant,
) -> Result<Vec<Option<Socket>>, String> {
    let fd = netlink::open(netns_of)?;
    let until = deadline.min(Instant::now() + PATIENCE);
    let mut found = Vec::with_capacity(known.len());
    for batch in known.chunks(BATCH) {
        found.extend(ask(&fd, batch, info, until)?);
    }
    Ok(found)
}

fn ask(
    fd: &OwnedFd,
    known: &[KnownSocket],
    info: bool,
    deadline: Instant,
) -> Result<Vec<Option<Socket>>, String> {
    let mut questions = Vec::with_capacity(known.len() * REQUEST_LEN);
    for (seq, k) in (FIRST_SEQ..).zip(known) {
        questions.extend_from_slice(&request(seq, k, info));
    }
    netlink::send(fd, &questions).map_err(|e| format!("send: {e}"))?;
    let mut answers: Vec<Option<Answer>> = vec![None; known.len()];
    // One answer is a few hundred bytes (the message, tcp_info and a few attributes).
    let mut buf = [0u8; 4096];
    while answers.iter().any(Option::is_none) {
        let n = netlink::receive(fd, &mut buf, deadline).map_err(|e| e.to_string())?;
        for (seq, answer) in parse_answers(&buf[..n]).map_err(|e| e.to_string())? {
            let slot = seq
                .checked_sub(FIRST_SEQ)
                .and_then(|i| answers.get_mut(i as usize));
            if let Some(slot) = slot {
                *slot = Some(answer);
            }
        }
    }
    answers
        .into_iter()
        .map(|a| match a {
            Some(Answer::Found(socket)) => Ok(socket),
            Some(Answer::NoSuchSocket) | None => Ok(None),
            Some(Answer::Refused(code)) => Err(DumpError::Kernel(code).to_string()),
        })
        .collect()
}

/// What the kernel said to one exact question.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    /// A socket under that name (None: one this reader cannot parse, taken as not found).
    Found(Option<Socket>),
    /// `NLMSG_ERROR` −ENOENT.
    NoSuchSocket,
    /// Any other error: the question itself was refused.
    Refused(i32),
}

/// One exact question: `SOCK_DIAG_BY_FAMILY` without `NLM_F_DUMP`, carrying the socket's
/// whole sockid as the dump reported it (the kernel compares the cookie, two native words,
/// low first; ports and addresses in network order). Every state is asked for: the answer
/// says which one the socket is in.
fn request(seq: u32, known: &KnownSocket, info: bool) -> [u8; REQUEST_LEN] {
    let mut msg = [0u8; REQUEST_LEN];
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        msg[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    put(&(REQUEST_LEN as u32).to_ne_bytes());
    put(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    put(&NLM_F_REQUEST.to_ne_bytes());
    put(&seq.to_ne_bytes());
    put(&0u32.to_ne_bytes());
    put(&[
        family(known.local, known.remote),
        libc::IPPROTO_TCP as u8,
        if info { INFO_EXT } else { 0 },
        0,
    ]);
    put(&u32::MAX.to_ne_bytes());
    put(&known.local.port().to_be_bytes());
    put(&known.remote.port().to_be_bytes());
    put(&address(known.local.ip()));
    put(&address(known.remote.ip()));
    put(&known.diag.interface.to_ne_bytes());
    put(&(known.diag.cookie as u32).to_ne_bytes());
    put(&((known.diag.cookie >> 32) as u32).to_ne_bytes());
    debug_assert_eq!(at, REQUEST_LEN);
    msg
}

/// The family the kernel reported the socket in: an IPv4 pair is AF_INET; an IPv6 pair
/// (IPv4-mapped ones included) AF_INET6.
fn family(local: SocketAddr, remote: SocketAddr) -> u8 {
    match (local, remote) {
        (SocketAddr::V4(_), SocketAddr::V4(_)) => libc::AF_INET as u8,
        _ => libc::AF_INET6 as u8,
    }
}

/// An address as `idiag_src`/`idiag_dst` hold it: IPv4 in the first word, IPv6 in all four.
fn address(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => {
            let mut bytes = [0u8; 16];
            bytes[..4].copy_from_slice(&v4.octets());
            bytes
        }
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// One datagram of answers: each message's sequence number and what it says. Messages of
/// other kinds (none are expected) are skipped.
fn parse_answers(data: &[u8]) -> Result<Vec<(u32, Answer)>, DumpError> {
    let mut out = Vec::new();
    for message in netlink::messages(data) {
        let (kind, seq, payload) = message?;
        let answer = match kind {
            SOCK_DIAG_BY_FAMILY => Answer::Found(parse_diag_msg(payload)),
            NLMSG_ERROR => match netlink::error_code(payload) {
                Some(code) if -code == libc::ENOENT => Answer::NoSuchSocket,
                Some(code) => Answer::Refused(-code),
                None => return Err(DumpError::Malformed("error message")),
            },
            _ => continue,
        };
        out.push((seq, answer));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::netlink::u32_at;
    use super::*;
    use crate::facts::{DiagId, TcpState};
    use std::net::{TcpListener, TcpStream};
    use std::time::Duration;

    fn known(local: &str, remote: &str, cookie: u64) -> KnownSocket {
        KnownSocket {
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
            inode: 77,
            diag: DiagId {
                cookie,
                interface: 0,
            },
            holder: None,
            stands_for: None,
        }
    }

    /// The bytes of `include/uapi/linux/inet_diag.h`'s request, field by field.
    #[test]
    fn a_question_is_the_sockid_the_dump_reported() {
        let k = known(
            "10.244.1.17:51828",
            "10.96.14.2:4222",
            0x1122_3344_5566_7788,
        );
        let msg = request(7, &k, true);
        assert_eq!(u32_at(&msg, 0) as usize, msg.len());
        assert_eq!(msg.len(), 72);
        assert_eq!(u16::from_ne_bytes([msg[4], msg[5]]), SOCK_DIAG_BY_FAMILY);
        // A request, not a dump.
        assert_eq!(u16::from_ne_bytes([msg[6], msg[7]]), NLM_F_REQUEST);
        assert_eq!(u32_at(&msg, 8), 7);
        let body = &msg[16..];
        assert_eq!(
            &body[..4],
            &[libc::AF_INET as u8, libc::IPPROTO_TCP as u8, INFO_EXT, 0]
        );
        assert_eq!(u32_at(body, 4), u32::MAX, "every state");
        let id = &body[8..];
        assert_eq!(&id[0..2], &51828u16.to_be_bytes());
        assert_eq!(&id[2..4], &4222u16.to_be_bytes());
        assert_eq!(
            &id[4..20],
            &[10, 244, 1, 17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(&id[20..24], &[10, 96, 14, 2]);
        assert_eq!(u32_at(id, 36), 0, "no bound interface");
        assert_eq!(u32_at(id, 40), 0x5566_7788, "the cookie's low word first");
        assert_eq!(u32_at(id, 44), 0x1122_3344);

        let mapped = known("[::ffff:10.244.1.17]:51828", "[::ffff:10.96.14.2]:4222", 1);
        let msg = request(1, &mapped, false);
        assert_eq!(msg[16], libc::AF_INET6 as u8);
        assert_eq!(msg[18], 0, "no tcp_info asked");
        assert_eq!(
            &msg[28..44],
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 244, 1, 17]
        );
    }

    /// An answer with a socket, a miss and a refusal, as one datagram could carry them.
    #[test]
    fn answers_are_told_apart_by_kind_and_sequence() {
        let mut data = Vec::new();
        // A SOCK_DIAG_BY_FAMILY answer: inet_diag_msg for an ESTABLISHED IPv4 socket.
        let mut diag = vec![0u8; 72];
        diag[0] = libc::AF_INET as u8;
        diag[1] = 1;
        diag[4..6].copy_from_slice(&51828u16.to_be_bytes());
        diag[6..8].copy_from_slice(&4222u16.to_be_bytes());
        diag[8..12].copy_from_slice(&[10, 244, 1, 17]);
        diag[24..28].copy_from_slice(&[10, 96, 14, 2]);
        diag[44..48].copy_from_slice(&0x5566_7788u32.to_ne_bytes());
        diag[48..52].copy_from_slice(&0x1122_3344u32.to_ne_bytes());
        diag[64..68].copy_from_slice(&1000u32.to_ne_bytes());
        diag[68..72].copy_from_slice(&77u32.to_ne_bytes());
        let message = |kind: u16, seq: u32, payload: &[u8]| {
            let mut m = Vec::new();
            m.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
            m.extend_from_slice(&kind.to_ne_bytes());
            m.extend_from_slice(&0u16.to_ne_bytes());
            m.extend_from_slice(&seq.to_ne_bytes());
            m.extend_from_slice(&0u32.to_ne_bytes());
            m.extend_from_slice(payload);
            m
        };
        data.extend(message(SOCK_DIAG_BY_FAMILY, 1, &diag));
        let error = |code: i32| {
            let mut e = code.to_ne_bytes().to_vec();
            e.extend_from_slice(&[0u8; 16]);
            e
        };
        data.extend(message(NLMSG_ERROR, 2, &error(-libc::ENOENT)));
        data.extend(message(NLMSG_ERROR, 3, &error(-libc::EINVAL)));
        let answers = parse_answers(&data).unwrap();
        assert_eq!(answers.len(), 3);
        let Answer::Found(Some(s)) = &answers[0].1 else {
            panic!("{answers:?}")
        };
        assert_eq!(answers[0].0, 1);
        assert_eq!(s.state, TcpState::Established);
        assert_eq!(s.local, "10.244.1.17:51828".parse().unwrap());
        assert_eq!(s.remote, "10.96.14.2:4222".parse().unwrap());
        assert_eq!(s.inode, 77);
        assert_eq!(s.diag.unwrap().cookie, 0x1122_3344_5566_7788);
        assert_eq!(answers[1], (2, Answer::NoSuchSocket));
        assert_eq!(answers[2], (3, Answer::Refused(libc::EINVAL)));
        // A message that claims more than the datagram holds is refused whole.
        assert!(parse_answers(&data[..20]).is_err());
    }

    fn dumped(port: u16, local: SocketAddr) -> Socket {
        let deadline = Instant::now() + Duration::from_secs(5);
        netlink::scan(netlink::INET_DIAG_BC_D_COND, &[port], None, true, deadline)
            .unwrap()
            .into_iter()
            .find(|s| s.local == local && s.state == TcpState::Established)
            .expect("the dump shows our socket")
    }

    fn remembered(s: &Socket) -> KnownSocket {
        KnownSocket {
            local: s.local,
            remote: s.remote,
            inode: s.inode,
            diag: s.diag.unwrap(),
            holder: None,
            stands_for: None,
        }
    }

    /// More questions than one datagram carries: every answer, in order.
    #[test]
    fn many_questions_are_asked_a_batch_at_a_time() {
        let deadline = Instant::now() + Duration::from_secs(5);
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        let clients: Vec<TcpStream> = (0..BATCH + 5)
            .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
            .collect();
        let _accepted: Vec<_> = clients.iter().map(|_| server.accept().unwrap()).collect();
        let table =
            netlink::scan(netlink::INET_DIAG_BC_D_COND, &[port], None, false, deadline).unwrap();
        let mut known: Vec<KnownSocket> = clients
            .iter()
            .map(|c| {
                let local = c.local_addr().unwrap();
                remembered(table.iter().find(|s| s.local == local).unwrap())
            })
            .collect();
        // One that is gone, in the middle of the second batch.
        known[BATCH + 2].diag.cookie ^= 1;
        let found = look_up(&known, None, false, deadline).unwrap();
        assert_eq!(found.len(), known.len());
        for (i, (k, f)) in known.iter().zip(&found).enumerate() {
            match i == BATCH + 2 {
                true => assert_eq!(f, &None),
                false => assert_eq!(f.as_ref().map(|s| s.inode), Some(k.inode)),
            }
        }
    }

    /// On real sockets: what the dump reported is found again, with its inode and tcp_info;
    /// after it closes, the same name is not.
    #[test]
    fn the_kernel_finds_exactly_the_socket_the_dump_reported() {
        let deadline = Instant::now() + Duration::from_secs(5);
        for (listen, mapped) in [("127.0.0.1:0", false), ("[::1]:0", false), ("[::]:0", true)] {
            let server = TcpListener::bind(listen).unwrap();
            let port = server.local_addr().unwrap().port();
            let to = match mapped {
                true => format!("[::ffff:127.0.0.1]:{port}"),
                false => server.local_addr().unwrap().to_string(),
            };
            let client = TcpStream::connect(to).unwrap();
            let (accepted, _) = server.accept().unwrap();
            let seen = dumped(port, client.local_addr().unwrap());
            let k = remembered(&seen);
            let found = look_up(&[k], None, true, deadline).unwrap();
            let again = found[0].as_ref().expect("found by its exact name");
            assert_eq!(again.state, TcpState::Established);
            assert_eq!(again.inode, seen.inode);
            assert_eq!(again.diag, seen.diag);
            assert!(again.info.is_some(), "tcp_info in the answer");
            if mapped {
                // The same socket by the other family's name.
                let mut v4 = k;
                v4.local = SocketAddr::new(crate::facts::unmap(k.local.ip()), k.local.port());
                v4.remote = SocketAddr::new(crate::facts::unmap(k.remote.ip()), k.remote.port());
                let by_v4 = look_up(&[v4], None, false, deadline).unwrap();
                assert_eq!(by_v4[0].as_ref().map(|s| s.inode), Some(seen.inode));
            }
            // Another cookie under the same addresses: no such socket.
            let mut other = k;
            other.diag.cookie ^= 1;
            assert_eq!(
                look_up(&[other, k], None, false, deadline).unwrap()[0],
                None
            );
            drop(accepted);
            drop(client);
            // Closed first by the client: TIME_WAIT, which keeps the cookie, and no inode.
            std::thread::sleep(Duration::from_millis(20));
            if let Some(s) = &look_up(&[k], None, false, deadline).unwrap()[0] {
                assert_ne!(s.state, TcpState::Established, "{s:?}");
                assert_eq!(s.inode, 0, "{s:?}");
            }
        }
    }
}
