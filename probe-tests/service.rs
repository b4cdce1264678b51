//! The socket check behind a Kubernetes Service, both kinds of dataplane, with real nats.go
//! clients and nats-server: a socket-level load balancer (a real `cgroup/connect4` and
//! `connect6` BPF hook, as Cilium's kube-proxy replacement attaches: the pod's socket holds the
//! backend's tuple) and kube-proxy's DNAT (an iptables `nat` rule: the socket keeps the
//! Service's). Healthy clients pass with and without `--remote` naming the Service CIDR, with
//! the Service's port equal to its target port or not; a client that closed its connection
//! while NATS answers fails in every variant.

use crate::harness::service::{dnat, SocketLb};
use crate::harness::*;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const S10: Duration = Duration::from_secs(10);

/// Where NATS runs behind the Service.
enum Backend {
    /// In the pod's own namespace, on loopback (the first finding).
    Loopback,
    /// In a namespace of its own, as the NATS pod, over a veth link (10.N.0.2, fd00:N::2).
    OtherPod(u8),
}

enum Dataplane {
    SocketLb,
    Dnat,
}

struct World {
    pod: Arc<NetNs>,
    _nats_ns: Option<Arc<NetNs>>,
    server: NatsServer,
    lb: Option<SocketLb>,
    service: SocketAddr,
}

impl World {
    fn new(dataplane: Dataplane, service: &str, backend: Backend, target_port: u16) -> World {
        let service: SocketAddr = service.parse().unwrap();
        let pod = Arc::new(NetNs::new());
        let v6 = service.is_ipv6();
        let (nats_ns, host) = match backend {
            Backend::Loopback => (None, if v6 { "::1" } else { "127.0.0.1" }.to_string()),
            Backend::OtherPod(subnet) => {
                let nats = Arc::new(NetNs::new());
                let (_, b) = link_subnet(&pod, &nats, subnet);
                let dev = format!("veth{subnet}");
                let host = match v6 {
                    true => {
                        let (a6, b6) = (format!("fd00:{subnet}::1"), format!("fd00:{subnet}::2"));
                        pod.ip(&["addr", "add", &format!("{a6}/64"), "dev", &dev, "nodad"]);
                        nats.ip(&["addr", "add", &format!("{b6}/64"), "dev", &dev, "nodad"]);
                        b6
                    }
                    false => b,
                };
                (Some(nats), host)
            }
        };
        let server = NatsServer::start(
            Some(nats_ns.as_ref().unwrap_or(&pod)),
            Version::Pinned,
            &host,
            target_port,
        );
        let lb = match dataplane {
            Dataplane::SocketLb => Some(SocketLb::new(service, server.addr())),
            Dataplane::Dnat => {
                let dev = match &nats_ns {
                    Some(_) => pod_dev(&pod),
                    None => "lo".to_string(),
                };
                dnat(&pod, service, server.addr(), &dev);
                None
            }
        };
        World {
            pod,
            _nats_ns: nats_ns,
            server,
            lb,
            service,
        }
    }

    fn url(&self) -> String {
        format!("nats://{}", self.service)
    }

    fn client(&self, max_reconnects: i32) -> Peer {
        match &self.lb {
            Some(lb) => Peer::conn_lb(Some(&self.pod), lb, &self.url(), max_reconnects, "200ms"),
            None => Peer::conn(Some(&self.pod), &self.url(), max_reconnects, "200ms"),
        }
    }

    fn check(&self, extra: &[&str]) -> crate::harness::probe::Run {
        self.run("check", extra)
    }

    fn diagnose(&self, extra: &[&str]) -> crate::harness::probe::Run {
        self.run("diagnose", extra)
    }

    /// `natsprobe COMMAND --server <the Service's URL> EXTRA...` in the pod, and in its load
    /// balancer's cgroup when there is one.
    fn run(&self, command: &str, extra: &[&str]) -> crate::harness::probe::Run {
        let url = self.url();
        let mut args = vec![command, "--server", url.as_str()];
        args.extend_from_slice(extra);
        let p = probe(&args).ns(&self.pod).env("NO_COLOR", "1");
        match &self.lb {
            Some(lb) => p.lb(lb).run(),
            None => p.run(),
        }
    }
}

/// The pod's end of its one veth link.
fn pod_dev(pod: &NetNs) -> String {
    let out = pod
        .command("ip")
        .args(["-o", "link", "show", "type", "veth"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let name = text.split(':').nth(1).unwrap().trim();
    name.split('@').next().unwrap().to_string()
}

/// Every variant's promise: the healthy client passes with and without `--remote` naming the
/// Service CIDR (the one `--help` gives), the second run too (by the exact lookup of the
/// connection the first counted); once the client gave up for good while NATS answers,
/// every run fails, naming where the kernel would have held its connection.
fn holds_and_then_fails(mut w: World, cidr: &str) {
    let mut client = w.client(3);
    // The line names where the kernel holds the connection.
    let backend = match &w.lb {
        Some(_) => w.server.addr().to_string(),
        None => w.service.to_string(),
    };
    for extra in [&[][..], &["--remote", cidr][..]] {
        let first = w.check(extra);
        first
            .expect(0)
            .says(&["healthy: 1 ESTABLISHED TCP connection", &backend]);
        let again = w.check(&[extra, &["--json"]].concat());
        let json = again.expect(0).json();
        assert_eq!(json["connection"]["live"], 1, "{again}");
        assert_eq!(json["connection"]["lookup"], "exact", "{again}");
    }
    w.server.stop();
    client.wait_for("closed", S10);
    w.server.resume();
    assert!(
        client.is_alive(),
        "the client process outlives its connection"
    );
    for extra in [&[][..], &["--remote", cidr][..]] {
        let run = w.check(extra);
        run.expect(1)
            .says(&["unhealthy: client holds no connection while", "answers"]);
        if w.lb.is_some() {
            // Where the kernel would hold it, looked at too.
            run.says(&[&format!("nor to {backend}")]);
        }
    }
}

/// Socket-level load balancing, Service port = target port, backend on the pod's loopback:
/// healthy without `--remote` (the port matches), and with `--remote` on the Service CIDR,
/// which the socket's tuple (the backend's) is not in.
#[test]
fn socket_lb_with_equal_ports() {
    let w = World::new(
        Dataplane::SocketLb,
        "10.96.0.10:4222",
        Backend::Loopback,
        4222,
    );
    holds_and_then_fails(w, "10.96.0.0/12");
}

/// Socket-level load balancing to another target port (4222 → 14222): the socket holds
/// 127.0.0.1:14222, which neither `--port 4222` nor the Service CIDR names.
#[test]
fn socket_lb_to_another_target_port() {
    let w = World::new(
        Dataplane::SocketLb,
        "10.96.0.10:4222",
        Backend::Loopback,
        14222,
    );
    holds_and_then_fails(w, "10.96.0.0/12");
}

/// The same, to a NATS pod of its own (10.211.0.2:14222).
#[test]
fn socket_lb_to_another_pod() {
    let w = World::new(
        Dataplane::SocketLb,
        "10.96.0.10:4222",
        Backend::OtherPod(211),
        14222,
    );
    holds_and_then_fails(w, "10.96.0.0/12");
}

/// IPv6: the `connect6` hook, to a NATS pod of its own ([fd00:212::2]:14222).
#[test]
fn socket_lb_over_ipv6() {
    let w = World::new(
        Dataplane::SocketLb,
        "[fd00:96::10]:4222",
        Backend::OtherPod(212),
        14222,
    );
    holds_and_then_fails(w, "fd00:96::/108");
}

/// kube-proxy's DNAT to another target port on another pod: the socket keeps the Service's
/// tuple, and the check matches it as it always did.
#[test]
fn kube_proxy_dnat() {
    let w = World::new(
        Dataplane::Dnat,
        "10.96.0.10:4222",
        Backend::OtherPod(213),
        14222,
    );
    holds_and_then_fails(w, "10.96.0.0/12");
}

/// `diagnose` says where the connection is held, and the JSON carries both tuples: the
/// server's answer has the route the probe's own connection showed, and the counted
/// connection the route it counts through.
#[test]
fn diagnose_says_where_the_kernel_holds_the_connection() {
    let w = World::new(
        Dataplane::SocketLb,
        "10.96.0.10:4222",
        Backend::Loopback,
        14222,
    );
    let _client = w.client(60);
    let diagnosed = w.diagnose(&["--remote", "10.96.0.0/12"]);
    diagnosed.expect(0);
    for said in [
        "the connection to nats://10.96.0.10:4222 is held as 127.0.0.1:14222 (socket-level load balancing)",
        "1 ESTABLISHED TCP connection to remote port 4222 on 10.96.0.0/12 (127.0.0.1:14222 for 10.96.0.10:4222)",
    ] {
        assert!(diagnosed.stdout.contains(said), "{said}\n{diagnosed}");
    }
    let run = w.check(&["--remote", "10.96.0.0/12", "--json", "-v"]);
    // The first run of this state dir walked (nothing remembered): the server was asked.
    let json = run.expect(0).json();
    let route = &json["server"]["answers"][0]["routes"][0];
    assert_eq!(route["dialled"], "10.96.0.10:4222", "{json}");
    assert_eq!(route["held_as"], "127.0.0.1:14222", "{json}");
    assert_eq!(route["via"], "socket_lb", "{json}");
    let counted = &json["connection"]["routes"][0];
    assert_eq!(counted["held_as"], "127.0.0.1:14222", "{json}");
    assert_eq!(
        json["connection"]["sockets"][0]["remote"], "127.0.0.1:14222",
        "{json}"
    );
    // The next run looks the connection up by its kernel tuple, and counts it again.
    let json = w
        .check(&["--remote", "10.96.0.0/12", "--json"])
        .expect(0)
        .json();
    assert_eq!(json["connection"]["lookup"], "exact", "{json}");
    assert_eq!(json["connection"]["routes"][0]["via"], "counted", "{json}");
}

/// A Service over two NATS pods: the client's connect landed on one, the probe's lands on the
/// other. A client socket to the learned target port is asked directly which NATS it is: a
/// member of the same cluster (no `connect_urls`: `--no_advertise`) counts for the Service; a
/// server of its own (another `server_id`, no cluster) does not, and the client is called.
#[test]
fn another_backend_counts_when_it_is_the_same_nats() {
    for clustered in [true, false] {
        let pod = Arc::new(NetNs::new());
        let nats = Arc::new(NetNs::new());
        let (_, a) = link_subnet(&pod, &nats, 221);
        let b = "10.221.0.3";
        nats.ip(&["addr", "add", &format!("{b}/24"), "dev", "veth221"]);
        let server = |host: &str, other: &str| {
            let cluster = format!("nats://{host}:6222");
            let route = format!("nats://{other}:6222");
            let args: Vec<&str> = match clustered {
                true => vec![
                    "-n",
                    host,
                    "--cluster_name",
                    "probe",
                    "--cluster",
                    &cluster,
                    "--routes",
                    &route,
                    "--no_advertise",
                ],
                false => vec![],
            };
            NatsServer::start_with(Some(&nats), Version::Pinned, host, 14222, &args)
        };
        let (server_a, server_b) = (server(&a, b), server(b, &a));
        let service: SocketAddr = "10.96.0.10:4222".parse().unwrap();
        let lb = SocketLb::new(service, server_a.addr());
        let _client = Peer::conn_lb(Some(&pod), &lb, "nats://10.96.0.10:4222", 60, "200ms");
        lb.set(service, server_b.addr());
        let run = probe(&[
            "check",
            "--server",
            "nats://10.96.0.10:4222",
            "--remote",
            "10.96.0.0/12",
        ])
        .ns(&pod)
        .lb(&lb)
        .run();
        match clustered {
            true => {
                run.expect(0)
                    .says(&[&format!("({a}:14222 for 10.96.0.10:4222)")]);
            }
            false => {
                run.expect(1).says(&[
                    "unhealthy: client holds no connection while",
                    &format!("nor to {b}:14222"),
                ]);
            }
        }
    }
}
