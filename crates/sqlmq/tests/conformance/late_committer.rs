//! What the late-committer scenarios (`topic_publish`, `topic_groups`) share: producer B,
//! which publishes and commits in a task of its own while producer A's transaction is open.

use std::future::Future;
use std::time::Duration;

use sqlmq::{Client, Record, Topic};
use sqlmq_testkit::TestBackend;
use tokio::task::JoinHandle;

/// Publish `body` in a transaction of its own and commit, in a task.
pub(crate) fn publish_in_task<B: TestBackend>(
    client: &Client<B>,
    topic: &Topic<B>,
    body: &'static str,
) -> JoinHandle<()> {
    let (c, t) = (client.clone(), topic.clone());
    tokio::spawn(async move {
        let mut tx = c.begin().await.unwrap();
        t.publish_in(&mut tx, Record::new(body)).await.unwrap();
        tx.commit().await.unwrap();
    })
}

/// Whether `b` (B's publish) finishes within 2 s while A is still open: it does where writers
/// run concurrently; only a one-writer database may make B wait for A's commit (asserted).
pub(crate) async fn finishes_while_a_is_open<B: TestBackend>(b: impl Future) -> bool {
    let concurrent = tokio::time::timeout(Duration::from_secs(2), b)
        .await
        .is_ok();
    assert!(
        concurrent || B::SCHEME == "sqlite",
        "B waited for A on {}",
        B::SCHEME
    );
    concurrent
}
