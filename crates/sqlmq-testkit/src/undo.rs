//! InnoDB's history list made to grow on purpose: a read view held open while a row is
//! updated, so that purge may keep none of the versions committed after it (what a
//! long-running transaction does to a queue).

use sqlx::{Connection, MySql, MySqlConnection};

use crate::TestDb;

/// The transaction holding the read view: roll it back (or drop it) to let purge run.
pub struct HeldReadView(pub MySqlConnection);

impl HeldReadView {
    /// End the transaction and close its connection.
    pub async fn release(mut self) {
        sqlx::raw_sql("ROLLBACK")
            .execute(&mut self.0)
            .await
            .unwrap();
        self.0.close().await.unwrap();
    }
}

/// In `db`, open a read view (as the admin) and then commit `updates` updates of one row of a
/// table `counter` made here: InnoDB's history list length grows by at least `updates` and
/// stays there while the view is held.
///
/// ```no_run
/// # async fn f(db: sqlmq_testkit::TestDb<sqlx::MySql>) {
/// let view = sqlmq_testkit::hold_undo(&db, 200).await;
/// // … read the history list length …
/// view.release().await;
/// # }
/// ```
pub async fn hold_undo(db: &TestDb<MySql>, updates: usize) -> HeldReadView {
    db.exec(
        "CREATE TABLE counter (id INT PRIMARY KEY, n INT NOT NULL)",
        &[],
    )
    .await;
    db.exec("INSERT INTO counter VALUES (1, 0)", &[]).await;
    let mut holder = MySqlConnection::connect(&db.admin_url).await.unwrap();
    sqlx::raw_sql("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        .execute(&mut holder)
        .await
        .unwrap();
    sqlx::query("SELECT n FROM counter")
        .fetch_all(&mut holder)
        .await
        .unwrap();
    for _ in 0..updates {
        db.exec("UPDATE counter SET n = n + 1 WHERE id = 1", &[])
            .await;
    }
    HeldReadView(holder)
}
