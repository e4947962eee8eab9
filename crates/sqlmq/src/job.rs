//! Typed jobs: a serde payload with a name, enqueued as JSON.
//!
//! The name travels in the `sqlmq-job` header ([`Message::JOB_HEADER`]) so that a worker can
//! refuse a message meant for another job type instead of misreading it.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::domain::Result;
use crate::domain::{Message, Sent};
use crate::queue::Queue;
use crate::store::Backend;

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
    /// The header holding a job's [`Job::NAME`]: `sqlmq-job`. [`Message::job`] sets it, and a
    /// worker's typed handler dead-letters a message whose header names another job. A
    /// producer that is not written in Rust sets it to send typed jobs.
    ///
    /// ```
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct Ping;
    /// # impl sqlmq::Job for Ping { const NAME: &'static str = "ping"; }
    /// use sqlmq::Message;
    /// assert_eq!(Message::JOB_HEADER, "sqlmq-job");
    /// // By hand, what `Message::job(&Ping)` builds:
    /// let by_hand = Message::new("null").header(Message::JOB_HEADER, "ping");
    /// # let _ = (by_hand, Message::job(&Ping)?);
    /// # Ok::<(), sqlmq::Error>(())
    /// ```
    pub const JOB_HEADER: &str = "sqlmq-job";

    /// A message carrying `job` as JSON, tagged with its name ([`Message::JOB_HEADER`]). Chain
    /// options as usual.
    ///
    /// ```
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct Ping;
    /// # impl sqlmq::Job for Ping { const NAME: &'static str = "ping"; }
    /// let msg = sqlmq::Message::job(&Ping)?.priority(-1);
    /// # Ok::<(), sqlmq::Error>(())
    /// ```
    pub fn job<J: Job>(job: &J) -> Result<Message> {
        Ok(Message::json(job)?.header(Message::JOB_HEADER, J::NAME))
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
