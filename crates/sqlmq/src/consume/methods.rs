//! The settling methods every consumable handle has — [`Queue`](crate::Queue),
//! [`Group`](crate::Group) and [`Source`](crate::source::Source) — written once: each calls the one
//! consumption path (`settle.rs`) through the handle's `consumer()`.

/// Generate `ack`, `ack_batch`, `ack_in`, `ack_batch_in`, `nack`, `nack_in`, `snooze`,
/// `snooze_in`, `dead_letter`, `dead_letter_in` and `extend` for `$ty<B>`; `$ex` is the type's name in the
/// doc examples.
macro_rules! consume_methods {
    ($ty:ident, $ex:literal) => {
        impl<B: $crate::store::Backend> $ty<B> {
            /// Ack: the message is done (deleted from a queue; recorded as consumed in a
            /// group). Fails with [`Error::LeaseLost`](crate::Error::LeaseLost), changing
            /// nothing, when the receipt no longer holds the lease, and with
            /// [`Error::Cancelled`](crate::Error::Cancelled) when its message was cancelled
            /// while in flight.
            ///
            /// ```no_run
            #[doc = concat!("# async fn f(x: sqlmq::", $ex, ", d: sqlmq::Delivery) -> sqlmq::Result<()> {")]
            /// x.ack(d.receipt()).await?;
            /// # Ok(()) }
            /// ```
            pub async fn ack(&self, receipt: $crate::domain::Receipt) -> $crate::Result<()> {
                let consumer = self.consumer();
                let lost = $crate::consume::lost_to_error(consumer.ack_batch(&[receipt]).await?);
                consumer.explained(lost).await
            }

            /// Ack many receipts in one transaction. Receipts that no longer hold their lease
            /// are reported in [`AckReport::lost`](crate::queue::AckReport::lost); the others are
            /// acked.
            ///
            /// ```no_run
            #[doc = concat!("# async fn f(x: sqlmq::", $ex, ", batch: Vec<sqlmq::Delivery>) -> sqlmq::Result<()> {")]
            /// let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
            /// let report = x.ack_batch(&receipts).await?;
            /// for r in &report.lost { eprintln!("lease lost for {}", r.id) }
            /// # Ok(()) }
            /// ```
            pub async fn ack_batch(
                &self,
                receipts: &[$crate::domain::Receipt],
            ) -> $crate::Result<$crate::domain::AckReport> {
                self.consumer().ack_batch(receipts).await
            }

            /// Ack inside the caller's transaction: the ack commits with the handler's own
            /// writes, or neither does (exactly-once effects). On
            /// [`Error::LeaseLost`](crate::Error::LeaseLost), roll the transaction back:
            /// another consumer owns the message and will apply its effects. A connection that
            /// is not in a transaction gets one of its own for the call.
            ///
            /// ```no_run
            #[doc = concat!("# async fn f(client: sqlmq::Client, x: sqlmq::", $ex, ", d: sqlmq::Delivery) -> anyhow::Result<()> {")]
            /// let mut tx = client.begin().await?;
            /// sqlx::query("UPDATE accounts SET balance = balance - 10 WHERE id = 7").execute(&mut *tx).await?;
            /// match x.ack_in(&mut tx, d.receipt()).await {
            ///     Ok(()) => tx.commit().await?,
            ///     Err(e) => { tx.rollback().await?; return Err(e.into()) }
            /// }
            /// # Ok(()) }
            /// ```
            pub async fn ack_in(
                &self,
                conn: &mut B::Connection,
                receipt: $crate::domain::Receipt,
            ) -> $crate::Result<()> {
                self.consumer().ack_in(conn, receipt).await
            }

            /// Ack many receipts inside the caller's transaction (see `ack_in`), in one pass:
            /// with the lock-held mode's `Queue::receive_in`, a whole batch is claimed,
            /// handled and acked in one transaction. Receipts that no longer hold their lease
            /// are reported in [`AckReport::lost`](crate::queue::AckReport::lost); whether to commit
            /// the rest is the caller's choice.
            ///
            /// ```no_run
            #[doc = concat!("# async fn f(client: sqlmq::Client, x: sqlmq::", $ex, ", batch: Vec<sqlmq::Delivery>) -> anyhow::Result<()> {")]
            /// let mut tx = client.begin().await?;
            /// let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
            /// let report = x.ack_batch_in(&mut tx, &receipts).await?;
            /// if report.lost.is_empty() { tx.commit().await? } else { tx.rollback().await? }
            /// # Ok(()) }
            /// ```
            pub async fn ack_batch_in(
                &self,
                conn: &mut B::Connection,
                receipts: &[$crate::domain::Receipt],
            ) -> $crate::Result<$crate::domain::AckReport> {
                self.consumer().ack_batch_in(conn, receipts).await
            }

            /// Nack: record `error` in the message's history and retry it after `retry_in`
            /// (or the backoff of the queue or group when `None`), or dead-letter it when this
            /// was its last attempt.
            ///
            /// ```no_run
            #[doc = concat!("# async fn f(x: sqlmq::", $ex, ", d: sqlmq::Delivery) -> sqlmq::Result<()> {")]
            /// x.nack(d.receipt(), Some(std::time::Duration::from_secs(5)), "upstream 503").await?;
            /// # Ok(()) }
            /// ```
            pub async fn nack(
                &self,
                receipt: $crate::domain::Receipt,
                retry_in: Option<std::time::Duration>,
                error: &str,
            ) -> $crate::Result<$crate::domain::NackOutcome> {
                let failure = $crate::domain::Failure::Retry {
                    after: retry_in,
                    error,
                    unit: rand::random(),
                };
                self.consumer().fail(None, receipt, failure).await
            }

            /// Nack inside the caller's transaction (see `ack_in`).
            ///
            /// ```no_run
            #[doc = concat!("# async fn f(client: sqlmq::Client, x: sqlmq::", $ex, ", d: sqlmq::Delivery) -> anyhow::Result<()> {")]
            /// let mut tx = client.begin().await?;
            /// sqlx::query("INSERT INTO failures (msg) VALUES (?)").bind(d.id.to_string()).execute(&mut *tx).await?;
            /// x.nack_in(&mut tx, d.receipt(), None, "validation failed").await?;
            /// tx.commit().await?;
            /// # Ok(()) }
            /// ```
            pub async fn nack_in(
                &self,
                conn: &mut B::Connection,
                receipt: $crate::domain::Receipt,
                retry_in: Option<std::time::Duration>,
                error: &str,
            ) -> $crate::Result<$crate::domain::NackOutcome> {
                let failure = $crate::domain::Failure::Retry {
                    after: retry_in,
                    error,
                    unit: rand::random(),
                };
                self.consumer().fail(Some(conn), receipt, failure).await
            }

            /// Deliver again after `after` without counting the attempt as a failure (it is not
            /// recorded in the error history and does not bring it closer to the dead letters).
            ///
            /// ```no_run
            #[doc = concat!("# async fn f(x: sqlmq::", $ex, ", d: sqlmq::Delivery) -> sqlmq::Result<()> {")]
            /// // the resource is busy: look again in a minute
            /// x.snooze(d.receipt(), std::time::Duration::from_secs(60)).await?;
            /// # Ok(()) }
            /// ```
            pub async fn snooze(
                &self,
                receipt: $crate::domain::Receipt,
                after: std::time::Duration,
            ) -> $crate::Result<()> {
                let failure = $crate::domain::Failure::Snooze { after };
                self.consumer().fail(None, receipt, failure).await.map(drop)
            }

            /// Snooze inside the caller's transaction (see `snooze` and `ack_in`).
            ///
            /// ```no_run
            #[doc = concat!("# async fn f(client: sqlmq::Client, x: sqlmq::", $ex, ", d: sqlmq::Delivery) -> anyhow::Result<()> {")]
            /// let mut tx = client.begin().await?;
            /// x.snooze_in(&mut tx, d.receipt(), std::time::Duration::from_secs(60)).await?;
            /// tx.commit().await?;
            /// # Ok(()) }
            /// ```
            pub async fn snooze_in(
                &self,
                conn: &mut B::Connection,
                receipt: $crate::domain::Receipt,
                after: std::time::Duration,
            ) -> $crate::Result<()> {
                let failure = $crate::domain::Failure::Snooze { after };
                self.consumer()
                    .fail(Some(conn), receipt, failure)
                    .await
                    .map(drop)
            }

            /// Dead-letter a claimed message now, whatever its attempts left (a permanent
            /// failure), recording `error` in its history.
            ///
            /// ```no_run
            #[doc = concat!("# async fn f(x: sqlmq::", $ex, ", d: sqlmq::Delivery) -> sqlmq::Result<()> {")]
            /// x.dead_letter(d.receipt(), "unknown customer: will never succeed").await?;
            /// # Ok(()) }
            /// ```
            pub async fn dead_letter(
                &self,
                receipt: $crate::domain::Receipt,
                error: &str,
            ) -> $crate::Result<()> {
                let failure = $crate::domain::Failure::DeadLetter { error };
                self.consumer().fail(None, receipt, failure).await.map(drop)
            }

            /// Dead-letter inside the caller's transaction (see `dead_letter` and `ack_in`).
            ///
            /// ```no_run
            #[doc = concat!("# async fn f(client: sqlmq::Client, x: sqlmq::", $ex, ", d: sqlmq::Delivery) -> anyhow::Result<()> {")]
            /// let mut tx = client.begin().await?;
            /// x.dead_letter_in(&mut tx, d.receipt(), "rejected").await?;
            /// tx.commit().await?;
            /// # Ok(()) }
            /// ```
            pub async fn dead_letter_in(
                &self,
                conn: &mut B::Connection,
                receipt: $crate::domain::Receipt,
                error: &str,
            ) -> $crate::Result<()> {
                let failure = $crate::domain::Failure::DeadLetter { error };
                self.consumer()
                    .fail(Some(conn), receipt, failure)
                    .await
                    .map(drop)
            }

            /// Extend a lease to `lease` from now (same token). Fails with
            /// [`Error::LeaseLost`](crate::Error::LeaseLost) when the lease already ended or
            /// was taken over.
            ///
            /// ```no_run
            #[doc = concat!("# async fn f(x: sqlmq::", $ex, ", d: sqlmq::Delivery) -> sqlmq::Result<()> {")]
            /// x.extend(d.receipt(), std::time::Duration::from_secs(120)).await?;
            /// # Ok(()) }
            /// ```
            pub async fn extend(
                &self,
                receipt: $crate::domain::Receipt,
                lease: std::time::Duration,
            ) -> $crate::Result<()> {
                self.consumer().extend(receipt, lease).await
            }
        }
    };
}

pub(crate) use consume_methods;
