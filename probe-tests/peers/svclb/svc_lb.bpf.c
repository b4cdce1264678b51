// SPDX-License-Identifier: GPL-2.0
/*
 * A socket-level load balancer, as the tests' Kubernetes Service: the kind of hook Cilium's
 * kube-proxy replacement and other eBPF dataplanes attach. `connect()` to the Service's
 * address and port is rewritten, before the socket connects, to the backend's; the socket
 * then holds the backend's tuple (what sock_diag and /proc/net/tcp show), and `getpeername()`
 * gives the application the Service back.
 *
 * The Services: svc_map, from a Service's address and port to its backend's. Addresses in
 * network byte order (IPv4 in ip[0], the rest 0); ports as `ctx->user_port` holds them (the
 * network-order 16 bits in the low half of a u32).
 */
#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>

struct svc_key {
	__u32 ip[4];
	__u32 port;
	__u32 family;		/* 4 or 6 */
};

struct backend {
	__u32 ip[4];
	__u32 port;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct svc_key);
	__type(value, struct backend);
} svc_map SEC(".maps");

/* What a rewritten socket asked to connect to, for getpeername. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct svc_key);
} orig_map SEC(".maps");

SEC("cgroup/connect4")
int svc_connect4(struct bpf_sock_addr *ctx)
{
	struct svc_key k = {};
	struct backend *b;
	struct svc_key *o;

	if (ctx->protocol != IPPROTO_TCP)
		return 1;
	k.family = 4;
	k.ip[0] = ctx->user_ip4;
	k.port = ctx->user_port;
	b = bpf_map_lookup_elem(&svc_map, &k);
	if (!b)
		return 1;
	o = bpf_sk_storage_get(&orig_map, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (o)
		*o = k;
	ctx->user_ip4 = b->ip[0];
	ctx->user_port = b->port;
	return 1;		/* 1: connect() goes on; 0 would be EPERM */
}

SEC("cgroup/connect6")
int svc_connect6(struct bpf_sock_addr *ctx)
{
	struct svc_key k = {};
	struct backend *b;
	struct svc_key *o;

	if (ctx->protocol != IPPROTO_TCP)
		return 1;
	k.family = 6;
	k.ip[0] = ctx->user_ip6[0];
	k.ip[1] = ctx->user_ip6[1];
	k.ip[2] = ctx->user_ip6[2];
	k.ip[3] = ctx->user_ip6[3];
	k.port = ctx->user_port;
	b = bpf_map_lookup_elem(&svc_map, &k);
	if (!b)
		return 1;
	o = bpf_sk_storage_get(&orig_map, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (o)
		*o = k;
	ctx->user_ip6[0] = b->ip[0];
	ctx->user_ip6[1] = b->ip[1];
	ctx->user_ip6[2] = b->ip[2];
	ctx->user_ip6[3] = b->ip[3];
	ctx->user_port = b->port;
	return 1;
}

SEC("cgroup/getpeername4")
int svc_getpeername4(struct bpf_sock_addr *ctx)
{
	struct svc_key *o = bpf_sk_storage_get(&orig_map, ctx->sk, 0, 0);

	if (o && o->family == 4) {
		ctx->user_ip4 = o->ip[0];
		ctx->user_port = o->port;
	}
	return 1;		/* getpeername programs must return 1 */
}

SEC("cgroup/getpeername6")
int svc_getpeername6(struct bpf_sock_addr *ctx)
{
	struct svc_key *o = bpf_sk_storage_get(&orig_map, ctx->sk, 0, 0);

	if (o && o->family == 6) {
		ctx->user_ip6[0] = o->ip[0];
		ctx->user_ip6[1] = o->ip[1];
		ctx->user_ip6[2] = o->ip[2];
		ctx->user_ip6[3] = o->ip[3];
		ctx->user_port = o->port;
	}
	return 1;
}

char _license[] SEC("license") = "GPL";
