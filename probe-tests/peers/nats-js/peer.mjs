// A nats.js v3 application pulling from a JetStream consumer with the APIs new code uses:
// `consume()` or a loop of `fetch()`. The tests run it in a pod's network namespace.
//
//   node peer.mjs URL STREAM/DURABLE consume|fetch [--expires MS] [--handle MS] [--name N]
//                 [--domain D] [--create [--inactive MS]]
//
// --create makes the durable first when it is missing (ack_wait 2 s; with --inactive, the
// server deletes it that long after its last pull: `inactive_threshold`), as an application
// that creates its consumer at start does.
//
// It prints `ready` once pulling. Each message is handled for --handle ms, then acked.
// SIGUSR1 stops the pull loop and keeps the connection (prints `stopped`); SIGUSR2 wedges the
// handler: the message in hand is never finished (prints `wedged`). SIGTERM closes and exits.
import { connect } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";

const [url, name, mode, ...rest] = process.argv.slice(2);
const opt = (flag, dflt) => {
  const i = rest.indexOf(flag);
  return i >= 0 ? rest[i + 1] : dflt;
};
const expires = Number(opt("--expires", "30000"));
const handle = Number(opt("--handle", "0"));
const [stream, durable] = name.split("/");

const nc = await connect({
  servers: url,
  name: opt("--name", "nats-js-peer"),
  maxReconnectAttempts: -1,
  reconnectTimeWait: 500,
});
const domain = opt("--domain", undefined);
const js = jetstream(nc, domain ? { domain } : {});
if (rest.includes("--create")) {
  const jsm = await jetstreamManager(nc, domain ? { domain } : {});
  const inactive = Number(opt("--inactive", "0"));
  const config = { durable_name: durable, ack_policy: "explicit", ack_wait: 2_000_000_000 };
  if (inactive > 0) config.inactive_threshold = inactive * 1_000_000;
  try {
    await jsm.consumers.info(stream, durable);
  } catch {
    await jsm.consumers.add(stream, config);
  }
}
const consumer = await js.consumers.get(stream, durable);
let stopped = false;
let wedged = false;
let messages = null;
process.on("SIGUSR1", () => {
  stopped = true;
  if (messages) messages.stop();
  console.log("stopped");
});
process.on("SIGUSR2", () => {
  wedged = true;
  console.log("wedged");
});
process.on("SIGTERM", async () => {
  await nc.close();
  process.exit(0);
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function handleOne(m) {
  if (handle > 0) await sleep(handle);
  while (wedged) await sleep(3600_000);
  m.ack();
}

if (mode === "consume") {
  messages = await consumer.consume({ expires, idle_heartbeat: Math.min(expires / 2, 15000) });
  console.log("ready");
  for await (const m of messages) {
    await handleOne(m);
  }
} else if (mode === "fetch") {
  console.log("ready");
  while (!stopped) {
    messages = await consumer.fetch({ max_messages: 10, expires });
    for await (const m of messages) {
      await handleOne(m);
    }
  }
} else {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
// The loop ended: the connection stays open, as an application whose loop died keeps it.
console.log("loop ended");
await new Promise(() => {});
