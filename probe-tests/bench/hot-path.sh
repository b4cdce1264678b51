#!/usr/bin/env bash
# Regenerates probe-tests/bench/hot-path.order: the functions `natsprobe check` runs on the
# socket path (the exact lookup after a healthy run first, then the walk; healthy, unhealthy,
# -v, --json, --pid), which the static build's linker places first (build.rs); and
# hot-path.ld: the read-only data a run after a healthy one reads, placed first too. Run as root after probe-tests/setup; needs valgrind. Re-run after any
# change to src/ (the compiler numbers many symbols' suffixes across the whole crate, so a
# change far from the socket path renames some), then compare `cargo bench --bench socket`.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v valgrind >/dev/null || { echo "hot-path.sh needs valgrind (apt-get install valgrind)" >&2; exit 2; }
deps=${NATSPROBE_DEPS:-$PWD/target/probe-deps}
server=$deps/nats-server-2.10.26/bin/nats-server
[ -x "$server" ] || { echo "run probe-tests/setup first" >&2; exit 2; }
work=target/hot-path
# The shipped build itself, with the linker's map for its symbols (build.rs): an unstripped
# build would be another build, with other names for most symbols.
mkdir -p "$work"
NATSPROBE_LINK_MAP=$PWD/$work/natsprobe.map \
  cargo build --release --locked --target x86_64-unknown-linux-musl --target-dir "$work"
bin=$work/x86_64-unknown-linux-musl/release/natsprobe
peer=$work/natspeer
(cd probe-tests/peers/natspeer && GO111MODULE=off GOPATH=/usr/share/gocode go build -o "$OLDPWD/$peer" .)

# A pod: a NATS server and a client in a network namespace of their own.
ns=nphot$$
ip netns add "$ns"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; ip netns del "$ns"' EXIT
ip -n "$ns" link set lo up
ip netns exec "$ns" "$server" -a 127.0.0.1 -p 4222 >/dev/null 2>&1 & pids+=($!)
sleep 0.5
ip netns exec "$ns" "$peer" conn -url nats://127.0.0.1:4222 >/dev/null & pids+=($!)
sleep 0.5

rm -f "$work"/callgrind.*
# The common run first: a check after a healthy one, which looks up the connections that run
# counted (so a first, untraced run remembers them); then the runs that walk the table; then
# the same with a second client (a Bento pod holds one connection per NATS input and output).
state=$(mktemp -d); fresh=$(mktemp -d); state2=$(mktemp -d); fresh2=$(mktemp -d)
trap 'kill "${pids[@]}" 2>/dev/null; ip netns del "$ns"; rm -rf "$state" "$fresh" "$state2" "$fresh2"' EXIT
client=${pids[1]}
name=$(basename "$peer")
prime() {
  # shellcheck disable=SC2086
  TMPDIR=$1 ip netns exec "$ns" "$bin" $2 >/dev/null
}
for args in "check" "check --pid $client" "check --process $name"; do
  prime "$state" "$args"
done
# A socket to the port in TIME_WAIT, as a pod has for a minute after any reconnect of its
# client and after each of a probe's own connections to NATS (--server, --consumer): a walk
# then also counts the port's sockets in other states, with code of its own.
timewait() {
  ip netns exec "$ns" python3 -c 'import socket
s = socket.create_connection(("127.0.0.1", 4222))
s.recv(4096)
s.close()'
}
run() {
  # shellcheck disable=SC2086
  TMPDIR=$1 ip netns exec "$ns" valgrind -q --tool=callgrind --dump-instr=yes --compress-pos=no \
    --callgrind-out-file="$work/callgrind.%p" "$bin" $2 >/dev/null || true
}
# The common run, then a first run (the walk, and the state file written), then the others.
run "$state" "check"
timewait
run "$fresh" "check"
for args in "check --pid $client" "check --process $name" "check -v" "check --json -v" "--port 4222"; do
  run "$state" "$args"
done
for args in "check --port 4223" "check --pid $client" "check --process $name" "check --min-connections 2" "check --reader proc"; do
  timewait
  run "$fresh" "$args"
done
# A second client.
ip netns exec "$ns" "$peer" conn -url nats://127.0.0.1:4222 >/dev/null & pids+=($!)
sleep 0.5
for args in "check" "check --process $name"; do
  prime "$state2" "$args"
done
run "$state2" "check"
timewait
run "$fresh2" "check"
run "$state2" "check --process $name"
run "$fresh2" "check --process $name"
# The map's symbol lines in its .text: "VMA LMA Size Align Symbol" (input sections have ":(").
awk '!/:\(/ && NF == 5 && $5 ~ /^\./ {out = $5; next}
     !/:\(/ && NF == 5 && out == ".text" {print $1, $5}' "$work/natsprobe.map" > "$work/symbols"
python3 - "$work" "$(rustc --version)" > probe-tests/bench/hot-path.order <<'PY'
import bisect, glob, os, re, sys
work = sys.argv[1]
syms = sorted((int(a, 16), name) for a, name in (l.split() for l in open(f"{work}/symbols")))
starts = [a for a, _ in syms]
order, seen = [], set()
# In the order the runs were made (each file is written as its run ends).
for path in sorted(glob.glob(f"{work}/callgrind.*"), key=os.path.getmtime):
    for line in open(path):
        m = re.match(r"^(0x[0-9a-f]+)\s", line)
        if not m:
            continue
        i = bisect.bisect_right(starts, int(m.group(1), 16)) - 1
        if i >= 0 and syms[i][1] not in seen:
            seen.add(syms[i][1])
            order.append(syms[i][1])
print("# The socket check's functions, placed first by the static build's linker (build.rs).")
print("# Generated by probe-tests/bench/hot-path.sh; do not edit by hand. The names are this")
print("# toolchain's (probe-tests/hot-path-fresh.sh checks them against a build):")
print(f"# rustc: {sys.argv[2]}")
print("\n".join(order))
PY
echo "hot-path.order: $(grep -vc '^#' probe-tests/bench/hot-path.order) symbols" >&2

# The read-only data the common run reads, placed first too (hot-path.ld): constants sit in
# sections without symbols, which the order file cannot name, so a linker script moves them,
# by section name, into an output section before .rodata (next to the ELF header, which every
# run reads). lackey records every load. It is slow: the default deadline ends its run past the
# command line (whose defaults, read only when a flag is absent, are what it needs), and a
# second run with a longer one goes on to the end; then a first run (the walk), after them.
lackey() {
  TMPDIR=$2 ip netns exec "$ns" valgrind -q --tool=lackey --trace-mem=yes \
    --log-file="$work/lackey.$1.out" "$bin" check "${@:3}" >/dev/null 2>&1 || true
}
first=$(mktemp -d)
lackey 1 "$state"
lackey 2 "$state" --timeout 30s
timewait
lackey 3 "$first" --timeout 30s
rm -rf "$first"
python3 - "$work" > probe-tests/bench/hot-path.ld <<'PY'
import bisect, sys
work = sys.argv[1]
sections, out = [], None
for line in open(f"{work}/natsprobe.map"):
    f = line.split()
    if ":(" not in line and len(f) == 5 and f[4].startswith("."):
        out = f[4]
    elif ":(" in line and out in (".rodata.hot", ".rodata") and len(f) >= 5:
        name = line.split(":(", 1)[1].rstrip(")\n")
        sections.append((int(f[0], 16), int(f[2], 16), name))
sections.sort()
starts = [s[0] for s in sections]
order, seen = [], set()
for line in (l for n in (1, 2, 3) for l in open(f"{work}/lackey.{n}.out")):
    if line[:2] not in (" L", " M"):
        continue
    a = int(line[3:].split(",")[0], 16)
    i = bisect.bisect_right(starts, a) - 1
    if i < 0 or a >= starts[i] + sections[i][1]:
        continue
    name = sections[i][2]
    if name not in seen:
        seen.add(name)
        order.append(name)
print("/* The read-only data `natsprobe check` reads after a healthy run (then on a first run),")
print("   placed first by the static build's linker (build.rs). Generated by")
print("   probe-tests/bench/hot-path.sh; do not edit by hand. */")
print("SECTIONS {")
print("  .rodata.hot : {")
# C's string literals are merged into one section named after its first piece: all of them.
print("    *(.rodata.str1.1) *(.rodata.*.str1.1)")
for name in (n for n in order if not n.endswith(".str1.1")):
    print(f"    *({name})")
print("  }")
print("}")
print("INSERT BEFORE .rodata;")
PY
echo "hot-path.ld: $(grep -c '^    \*(' probe-tests/bench/hot-path.ld) sections" >&2
