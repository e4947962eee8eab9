//! The worker across a schema upgrade (the guide, "Upgrading"): a worker of a newer sqlmq that
//! starts before `migrate` waits for it; a worker whose schema a newer sqlmq migrated while it
//! ran stops cleanly — no new claims, its handlers finish and are acked — and returns
//! [`Error::SchemaTooNew`], instead of failing messages on tables it does not know.

use std::sync::Mutex;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::domain::{Error, Result, check_not_newer};
use crate::outage::sleep_unless_stopped;
use crate::store::Backend;
use crate::store::SqlStore;

/// How often a worker waiting for `migrate` looks at the schema version again.
const MIGRATION_POLL: Duration = Duration::from_secs(1);

/// Wait until the schema is at this build's version. An older schema that exists is a rolling
/// upgrade in progress: wait for `migrate` (logged once). No schema at all is an error (nobody
/// ran `migrate`), as is a newer one. False when `stop` came first.
pub(super) async fn wait_for_migration<B: Backend>(
    client: &Client<B>,
    stop: &CancellationToken,
) -> Result<bool> {
    let latest = SqlStore::<B>::latest_version();
    let mut waiting = false;
    loop {
        let found = client
            .outage()
            .wait_out(stop, || client.read_schema_version())
            .await?;
        let Some(found) = found else {
            return Ok(false);
        };
        check_not_newer(found, latest)?;
        client.set_schema_version(found);
        if found == latest {
            if waiting {
                tracing::info!(version = found, "the schema was migrated: starting");
            }
            return Ok(true);
        }
        if found == 0 {
            return Err(Error::SchemaOutdated {
                found,
                required: latest,
            });
        }
        if !waiting {
            tracing::warn!(
                found,
                required = latest,
                "the schema is older than this sqlmq needs: waiting for `sqlmq migrate` (in a \
                 rolling upgrade the older version's workers stop once it has run)"
            );
            waiting = true;
        }
        if !sleep_unless_stopped(MIGRATION_POLL, stop).await {
            return Ok(false);
        }
    }
}

/// What the heartbeat saw of the schema: set once, when a newer sqlmq migrated it.
#[derive(Default)]
pub(super) struct SchemaWatch {
    upgraded: Mutex<Option<Error>>,
}

impl SchemaWatch {
    /// Compare the database's schema version with this build's (one small read, at each
    /// heartbeat); on a newer one, stop the worker's claims through `stop` and keep the error
    /// for [`SchemaWatch::take`].
    pub(super) async fn check<B: Backend>(
        &self,
        client: &Client<B>,
        stop: &CancellationToken,
    ) -> Result<()> {
        let found = client.read_schema_version().await?;
        let supported = SqlStore::<B>::latest_version();
        let Err(newer) = check_not_newer(found, supported) else {
            return Ok(());
        };
        let mut upgraded = self.upgraded.lock().expect("poisoned");
        if upgraded.is_none() {
            tracing::warn!(
                found,
                supported,
                "a newer sqlmq migrated the schema: this worker stops cleanly (no new claims; \
                 running handlers finish and are acked); start the newer version"
            );
            *upgraded = Some(newer);
            stop.cancel();
        }
        Ok(())
    }

    /// The upgrade seen, if any.
    pub(super) fn take(&self) -> Option<Error> {
        self.upgraded.lock().expect("poisoned").take()
    }
}
