//! Results: what an ack leaves for the jobs that depend on it ([`Queue::ack_with_result`]),
//! and reading them ([`Client::result`], [`Client::dependency_results`]).

use serde::Serialize;

use crate::client::Client;
use crate::domain::{Error, MAX_RESULT_BYTES, MessageId, Receipt, Result, micros_of};
use crate::queue::Queue;
use crate::store::Backend;
use crate::tx;

/// A dependency of a message and the result its ack left
/// ([`Client::dependency_results`]).
///
/// ```
/// # async fn f(client: sqlmq::Client, id: sqlmq::MessageId) -> sqlmq::Result<()> {
/// for dep in client.dependency_results(id).await? {
///     println!("{} ({:?}): {:?}", dep.id, dep.step, dep.result);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct DependencyResult {
    /// The dependency.
    pub id: MessageId,
    /// Its step name, in a workflow.
    pub step: Option<String>,
    /// Its result: `None` when its ack left none (or it is not acked yet, or it expired).
    pub result: Option<Vec<u8>>,
}

impl<B: Backend> Queue<B> {
    /// Ack and keep `result` (at most [`MAX_RESULT_BYTES`]) for the messages that depend on
    /// this one, and for [`Client::result`], for the client's flow retention
    /// ([`ClientBuilder::flow_retention`](crate::client::ClientBuilder::flow_retention), 7 days by
    /// default). Fails with
    /// [`Error::LeaseLost`], changing nothing, when the receipt no
    /// longer holds the lease.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue, d: sqlmq::Delivery) -> sqlmq::Result<()> {
    /// q.ack_with_result(d.receipt(), r#"{"width":640}"#).await?;
    /// # Ok(()) }
    /// ```
    pub async fn ack_with_result(
        &self,
        receipt: Receipt,
        result: impl Into<Vec<u8>>,
    ) -> Result<()> {
        let result = checked(result.into())?;
        let result = &result;
        tx::run(self.conns(), "ack", |conn, _| {
            Box::pin(self.ack_keeping(conn, receipt, result))
        })
        .await
    }

    /// [`Queue::ack_with_result`] inside the caller's transaction (see `ack_in`).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, q: sqlmq::Queue, d: sqlmq::Delivery) -> anyhow::Result<()> {
    /// let mut tx = client.begin().await?;
    /// q.ack_with_result_in(&mut tx, d.receipt(), "42").await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn ack_with_result_in(
        &self,
        conn: &mut B::Connection,
        receipt: Receipt,
        result: impl Into<Vec<u8>>,
    ) -> Result<()> {
        let result = checked(result.into())?;
        let result = &result;
        tx::run_in::<B, _, _>(conn, |conn, _| {
            Box::pin(self.ack_keeping(conn, receipt, result))
        })
        .await
    }

    async fn ack_keeping(
        &self,
        conn: &mut B::Connection,
        receipt: Receipt,
        result: &[u8],
    ) -> Result<()> {
        self.ack_in(conn, receipt).await?;
        self.store()
            .put_result(
                conn,
                receipt.id,
                result,
                micros_of(self.client().inner.settings.flow_retention),
            )
            .await
    }
}

fn checked(result: Vec<u8>) -> Result<Vec<u8>> {
    if result.len() > MAX_RESULT_BYTES {
        return Err(Error::PayloadTooLarge {
            size: result.len(),
            limit: MAX_RESULT_BYTES,
        });
    }
    Ok(result)
}

impl<B: Backend> Client<B> {
    /// The result the ack of message `id` left ([`Queue::ack_with_result`]), unless it
    /// expired; `None` when it left none.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, id: sqlmq::MessageId) -> sqlmq::Result<()> {
    /// if let Some(r) = client.result(id).await? { println!("{}", String::from_utf8_lossy(&r)) }
    /// # Ok(()) }
    /// ```
    pub async fn result(&self, id: MessageId) -> Result<Option<Vec<u8>>> {
        self.require_schema()?;
        let mut conn = self.conns().read().await?;
        self.store().result_of(&mut conn, id).await
    }

    /// The dependencies of message `id` ([`Message::depends_on`](crate::Message::depends_on),
    /// [`Batch::step`](crate::flow::Batch::step)), each with the result its ack left: what a
    /// workflow step's handler reads.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, d: sqlmq::Delivery) -> sqlmq::Result<()> {
    /// for dep in client.dependency_results(d.id).await? {
    ///     println!("{:?}: {:?}", dep.step, dep.result);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn dependency_results(&self, id: MessageId) -> Result<Vec<DependencyResult>> {
        self.require_schema()?;
        let mut conn = self.conns().read().await?;
        let rows = self.store().dependency_results(&mut conn, id).await?;
        Ok(rows
            .into_iter()
            .map(|(id, step, result)| DependencyResult { id, step, result })
            .collect())
    }
}
