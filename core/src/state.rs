//! What a check remembers from one run to the next: one value, kept whole in one file per
//! check (the shell's `observe::state`), serialized as the facts themselves. Observations and
//! clocks, never a verdict: the next healthy run passes.

use crate::facts::{ConsumerName, KnownSocket, Loaded, Sample, SubscriptionMemo, Wanted};
use crate::prelude::*;
use crate::rules::cause::Persisting;
use crate::rules::check::Episode;
use crate::rules::remembered::{LastLook, Of, SeenFault};
use alloc::borrow::Cow;
use serde::{Deserialize, Serialize};

/// Everything a check keeps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// The connections the last healthy run counted: the next run asks the kernel for
    /// exactly these (the exact lookup).
    pub sockets: Vec<KnownSocket>,
    /// The last look at the consumers.
    pub look: Option<LastLook>,
    /// Each consumer's last sample.
    pub samples: Vec<(ConsumerName, Sample)>,
    /// How each subscription's connection is known at the server.
    pub subscriptions: Vec<(Wanted, SubscriptionMemo)>,
    /// The faults the freshest looks saw, while they stand.
    pub faults: Vec<SeenFault>,
    /// The causes that may still become configuration errors, since when.
    pub causes: Vec<(Of, Persisting)>,
    /// Each consumer's fault natsprobe failed the pod for, while its episode lasts (a file
    /// written without them has none).
    #[serde(default)]
    pub episodes: Vec<(ConsumerName, Episode)>,
}

/// What was found where a check's state should be.
#[derive(Debug, Clone, PartialEq)]
pub enum Kept {
    State(State),
    /// No file yet.
    Missing,
    /// Unreadable, not a state, or a symlink: why.
    Corrupt(String),
    /// Another check's, or another version's.
    Foreign,
}

impl Kept {
    /// The state to go on from: nothing remembered unless one was read.
    pub fn state(&self) -> Cow<'_, State> {
        match self {
            Kept::State(s) => Cow::Borrowed(s),
            _ => Cow::Owned(State::default()),
        }
    }

    /// What was found for `consumer`'s sample, as the report words it.
    pub fn sample(&self, consumer: &ConsumerName) -> Loaded {
        match self {
            Kept::State(s) => s
                .sample(consumer)
                .cloned()
                .map_or(Loaded::Missing, Loaded::Sample),
            Kept::Missing => Loaded::Missing,
            Kept::Corrupt(why) => Loaded::Corrupt(why.clone()),
            Kept::Foreign => Loaded::Foreign,
        }
    }
}

impl State {
    pub fn sample(&self, consumer: &ConsumerName) -> Option<&Sample> {
        find(&self.samples, consumer)
    }

    pub fn memo(&self, wanted: &Wanted) -> SubscriptionMemo {
        find(&self.subscriptions, wanted)
            .cloned()
            .unwrap_or_default()
    }

    pub fn cause(&self, of: &Of) -> Option<&Persisting> {
        find(&self.causes, of)
    }

    pub fn fault(&self, of: &Of) -> Option<&SeenFault> {
        self.faults.iter().find(|f| f.of == *of)
    }

    pub fn set_sample(&mut self, consumer: &ConsumerName, sample: Option<Sample>) {
        set(&mut self.samples, consumer, sample);
    }

    /// An empty memo is none.
    pub fn set_memo(&mut self, wanted: &Wanted, memo: SubscriptionMemo) {
        let memo = (memo != SubscriptionMemo::default()).then_some(memo);
        set(&mut self.subscriptions, wanted, memo);
    }

    pub fn set_cause(&mut self, of: &Of, cause: Option<Persisting>) {
        set(&mut self.causes, of, cause);
    }

    pub fn episode(&self, consumer: &ConsumerName) -> Option<Episode> {
        find(&self.episodes, consumer).copied()
    }

    pub fn set_episode(&mut self, consumer: &ConsumerName, episode: Option<Episode>) {
        set(&mut self.episodes, consumer, episode);
    }

    pub fn set_fault(&mut self, of: &Of, fault: Option<SeenFault>) {
        self.faults.retain(|f| f.of != *of);
        self.faults.extend(fault);
    }
}

fn find<'a, K: PartialEq, V>(list: &'a [(K, V)], key: &K) -> Option<&'a V> {
    list.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn set<K: PartialEq + Clone, V>(list: &mut Vec<(K, V)>, key: &K, value: Option<V>) {
    match (list.iter().position(|(k, _)| k == key), value) {
        (Some(i), Some(v)) => list[i].1 = v,
        (Some(i), None) => {
            list.remove(i);
        }
        (None, Some(v)) => list.push((key.clone(), v)),
        (None, None) => {}
    }
}
