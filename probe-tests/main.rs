//! End-to-end scenarios: the built probe against real nats-server and real nats.go clients,
//! in network namespaces the tests create. Needs root and what probe-tests/setup installs.

mod alternatives;
mod chaos_drill;
mod configuration;
mod consumer_check;
mod consumer_rules;
mod environment;
mod exact_lookup;
mod examples;
mod guard;
mod half_open;
mod harness;
mod hostile;
mod image;
mod metrics;
mod nats_trouble;
mod operator_kit;
mod outage_drill;
mod permissions;
mod pull_replicas;
mod remembered;
mod restart;
mod runtime;
mod serve;
mod server_aware;
mod server_stall;
mod service;
mod socket_check;
pub(crate) mod subscription;
mod topologies;
