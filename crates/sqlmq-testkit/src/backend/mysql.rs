//! The conformance suite on MySQL/MariaDB: databases on the test server.

use sqlx::{MySql, MySqlConnection};

use super::{TestBackend, Value};

impl TestBackend for MySql {
    const TABLES: &'static str = "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
        WHERE table_schema = DATABASE()";
    const COLUMNS: &'static str = "SELECT CAST(column_name AS CHAR) FROM information_schema.columns \
        WHERE table_schema = DATABASE() AND table_name = ? ORDER BY ordinal_position";

    async fn reach(_: &mut MySqlConnection, other: &str) -> String {
        format!("`{other}`")
    }

    async fn create_database() -> String {
        crate::server::create_database().await
    }

    async fn drop_database(name: &str) {
        crate::server::drop_database(name).await;
    }

    fn url_of(name: &str) -> String {
        crate::server::url_for(name)
    }

    fn admin_url_of(name: &str) -> String {
        crate::server::admin_url_for(name)
    }

    async fn execute(conn: &mut MySqlConnection, sql: &str, args: &[Value]) -> u64 {
        super::execute_on::<Self>(conn, sql, args)
            .await
            .rows_affected()
    }

    async fn query(conn: &mut MySqlConnection, sql: &str, args: &[Value]) -> Vec<Vec<Value>> {
        super::query_on::<Self>(conn, sql, args).await
    }

    async fn expire_process(conn: &mut MySqlConnection, table: &str, id: &str) {
        let sql = format!(
            "UPDATE {table} SET expires_at = DATE_SUB(UTC_TIMESTAMP(6), INTERVAL 1 SECOND) \
             WHERE id = ?"
        );
        Self::execute(conn, &sql, &[Value::Bytes(id.as_bytes().to_vec())]).await;
    }
}
