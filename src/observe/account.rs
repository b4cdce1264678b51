//! The guard's one connection to a whole account, as `check` has `observe::Nats`: connect,
//! count the advisories between the looks (`advisories`), look at every consumer
//! (`listing`). The guard goes through here, never through the session itself.

use super::advisories::{self, Watch};
use super::listing;
use super::nats::Session;
use crate::config::{Auth, JsApi, ServerUrl};
use crate::error::Error;
use crate::facts::{Advisories, ConsumerName, Look, Observed, Unknown};
use std::time::Instant;

/// The name the guard's connection goes by in the server's connection list.
const NAME: &str = "natsprobe-guard";

/// One connection to the account, on the network runtime the guard runs on.
pub struct Account {
    session: Session,
}

impl Account {
    /// Connects by `deadline`. The outer error is a configuration error (an unusable
    /// credentials file); the inner one why the server could not be reached.
    pub async fn connect(
        servers: &[ServerUrl],
        auth: &Auth,
        api: &JsApi,
        deadline: Instant,
    ) -> Result<Result<Account, Unknown>, Error> {
        let session = Session::connect(servers, auth, api, NAME, deadline, false).await?;
        Ok(session.map(|session| Account { session }))
    }

    /// The JetStream domain the connected server announced, if any.
    pub fn server_domain(&self) -> Option<String> {
        self.session.server_domain()
    }

    /// Starts counting the advisories (`advisories::watch`).
    pub async fn watch(&self, deadline: Instant) -> Watch {
        advisories::watch(&self.session, deadline).await
    }

    /// Stops counting: the counts, or why there are none (`Watch::finish`).
    pub async fn finish(&self, watch: Watch) -> Advisories {
        watch.finish(&self.session).await
    }

    /// One look at every stream and consumer, each handed to `each` as its page comes in
    /// (`listing::look`).
    pub async fn look(
        &self,
        expected: &[ConsumerName],
        deadline: Instant,
        each: &mut dyn FnMut(ConsumerName, Observed),
    ) -> Result<Look, Unknown> {
        listing::look(&self.session, expected, deadline, each).await
    }
}
