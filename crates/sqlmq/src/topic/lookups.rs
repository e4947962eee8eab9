//! Creating and finding topics: methods of [`Client`], built here so that the client module
//! needs to know nothing of topics.

use super::Topic;
use crate::client::Client;
use crate::domain::{Error, Result, TopicConfig, validate_name};
use crate::store::Backend;

impl<B: Backend> Client<B> {
    /// Create a topic, or update the configuration of an existing one (partitions only grow).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// let t = client.create_topic("orders", sqlmq::TopicConfig::default().partitions(8)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_topic(&self, name: &str, config: TopicConfig) -> Result<Topic<B>> {
        validate_name("topic", name)?;
        config.validate()?;
        self.require_schema()?;
        let mut conn = self.inner.db.conns.acquire().await?;
        let row = self
            .inner
            .db
            .store
            .upsert_topic(&mut conn, name, &config)
            .await?;
        Ok(Topic::new(self.clone(), row.id, row.name, row.config))
    }

    /// A handle to an existing topic.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// let t = client.topic("orders").await?;
    /// # Ok(()) }
    /// ```
    pub async fn topic(&self, name: &str) -> Result<Topic<B>> {
        validate_name("topic", name)?;
        self.require_schema()?;
        let mut conn = self.conns().read().await?;
        match self.inner.db.store.topic_by_name(&mut conn, name).await? {
            Some(row) => Ok(Topic::new(self.clone(), row.id, row.name, row.config)),
            None => Err(Error::UnknownTopic(name.to_owned())),
        }
    }

    /// Handles to every topic, by name.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// for t in client.topics().await? { println!("{} ({} partitions)", t.name(), t.config().partitions) }
    /// # Ok(()) }
    /// ```
    pub async fn topics(&self) -> Result<Vec<Topic<B>>> {
        self.require_schema()?;
        let mut conn = self.conns().read().await?;
        let rows = self.inner.db.store.all_topics(&mut conn).await?;
        Ok(rows
            .into_iter()
            .map(|r| Topic::new(self.clone(), r.id, r.name, r.config))
            .collect())
    }
}
