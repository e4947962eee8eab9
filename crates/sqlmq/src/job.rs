//! Typed jobs: a serde payload with a name, enqueued as JSON.
//!
//! The name travels in the `sqlmq-job` header so that a worker can refuse a message meant for
//! another job type instead of misreading it.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::domain::Result;
use crate::domain::{Message, Sent};
use crate::queue::Queue;
use crate::store::Backend;

/// Header holding a job's [`Job::NAME`].
pub const JOB_HEADER: &str = "sqlmq-job";

/// A job type: a serde payload and a stable name.
///
/// ```
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct SendEmail { to: String, subject: String }
///
/// impl sqlmq::Job for SendEmail {
///     const NAME: &'static str = "send_email";
/// }
/// ```
pub trait Job: Serialize + DeserializeOwned + Send + 'static {
    /// The job's name, stored with each message. Keep it stable across deployments.
    const NAME: &'static str;
}

impl Message {
    /// A message carrying `job` as JSON, tagged with its name. Chain options as usual.
    ///
    /// ```
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct Ping;
    /// # impl sqlmq::Job for Ping { const NAME: &'static str = "ping"; }
    /// let msg = sqlmq::Message::job(&Ping)?.priority(-1);
    /// # Ok::<(), sqlmq::Error>(())
    /// ```
    pub fn job<J: Job>(job: &J) -> Result<Message> {
        Ok(Message::json(job)?.header(JOB_HEADER, J::NAME))
    }
}

impl<B: Backend> Queue<B> {
    /// Enqueue a typed job (see [`Message::job`] for options such as delays or keys).
    ///
    /// ```no_run
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct SendEmail { to: String }
    /// # impl sqlmq::Job for SendEmail { const NAME: &'static str = "send_email"; }
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// q.enqueue(&SendEmail { to: "a@example.com".into() }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn enqueue<J: Job>(&self, job: &J) -> Result<Sent> {
        self.send(Message::job(job)?).await
    }

    /// Enqueue a typed job inside the caller's transaction (see [`Queue::send_in`]).
    ///
    /// ```no_run
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct SendEmail { to: String }
    /// # impl sqlmq::Job for SendEmail { const NAME: &'static str = "send_email"; }
    /// # async fn f(client: sqlmq::Client, q: sqlmq::Queue) -> anyhow::Result<()> {
    /// let mut tx = client.begin().await?;
    /// sqlx::query("INSERT INTO users (email) VALUES ('a@example.com')").execute(&mut *tx).await?;
    /// q.enqueue_in(&mut tx, &SendEmail { to: "a@example.com".into() }).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn enqueue_in<J: Job>(&self, conn: &mut B::Connection, job: &J) -> Result<Sent> {
        self.send_in(conn, Message::job(job)?).await
    }
}
