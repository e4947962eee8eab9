//! How the examples start (a migrated client on the server at `SQLMQ_DATABASE_URL`, default
//! `mysql://root@127.0.0.1:3306/test`), and the business table some of them write to in the
//! same transaction as a message.
// Each example uses only part of this module.
#![allow(dead_code)]

use sqlmq::Client;
use sqlx::MySqlConnection;

/// Where to connect when `SQLMQ_DATABASE_URL` is not set.
const DEFAULT_URL: &str = "mysql://root@127.0.0.1:3306/test";

/// Connect and migrate (idempotent: a no-op when the schema is current; also `sqlmq migrate`).
pub async fn connect() -> sqlmq::Result<Client> {
    let url = std::env::var("SQLMQ_DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned());
    let client = Client::connect(&url).await?;
    client.migrate().await?;
    Ok(client)
}

/// Delete the topics `names` when they exist, so that the example starts afresh.
pub async fn delete_topics(client: &Client, names: &[&str]) -> sqlmq::Result<()> {
    for topic in names {
        match client.delete_topic(topic).await {
            Ok(()) | Err(sqlmq::Error::UnknownTopic(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The application's own table, `example_orders`, created when missing.
pub async fn create_orders_table(client: &Client) -> sqlx::Result<()> {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS example_orders \
         (id BIGINT AUTO_INCREMENT PRIMARY KEY, customer VARCHAR(100) NOT NULL)",
    )
    .execute(client.pool())
    .await?;
    Ok(())
}

/// A business write: insert an order on `conn` (the caller's transaction) and return its id.
pub async fn insert_order(conn: &mut MySqlConnection, customer: &str) -> sqlx::Result<u64> {
    let done = sqlx::query("INSERT INTO example_orders (customer) VALUES (?)")
        .bind(customer)
        .execute(conn)
        .await?;
    Ok(done.last_insert_id())
}
