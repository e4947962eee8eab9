//! The GRANT statements of the runtime and migration users, and of the optional notifications
//! and monitoring (the guide, "Least privilege").
//!
//! The table list is read from the migrations themselves, so a table added by a new migration is
//! granted without anyone remembering to list it here.

use super::schema::{CREATE_MIGRATIONS_TABLE, MIGRATIONS};
use crate::domain::GrantRole;
use crate::store::statements::Statements;

/// What every migration's table begins with.
const CREATE: &str = "CREATE TABLE IF NOT EXISTS {p}";

/// The names (without prefix) of the tables the migrations create, the version table last.
pub(crate) fn tables() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = MIGRATIONS
        .iter()
        .flat_map(|m| m.statements.iter())
        .chain(std::iter::once(&CREATE_MIGRATIONS_TABLE))
        .filter_map(|s| s.strip_prefix(CREATE))
        .map(|rest| rest.split([' ', '(', '\n']).next().unwrap_or(rest))
        .collect();
    let version_table = names.pop();
    names.sort_unstable();
    names.extend(version_table);
    names
}

/// `'text'` as a string literal of the server (quotes and backslashes escaped).
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// `` `name` `` as an identifier.
fn identifier(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// The statements granting `role` to `user`@`host` on `database`, with the client's prefix,
/// on a MariaDB server or a MySQL one.
pub(crate) fn statements(
    st: &Statements,
    mariadb: bool,
    database: &str,
    role: GrantRole,
    user: &str,
    host: &str,
) -> Vec<String> {
    let grantee = format!("{}@{}", literal(user), literal(host));
    let db = identifier(database);
    let mut out = Vec::new();
    if role == GrantRole::Notifications {
        let monitor = if mariadb {
            "BINLOG MONITOR"
        } else {
            "REPLICATION CLIENT"
        };
        out.push(format!(
            "GRANT REPLICATION SLAVE, {monitor} ON *.* TO {grantee};"
        ));
        return out;
    }
    if role == GrantRole::Monitoring {
        // MariaDB's status variable needs no privilege (see `server.rs`); MySQL's only source,
        // INNODB_METRICS, needs PROCESS.
        if !mariadb {
            out.push(format!("GRANT PROCESS ON *.* TO {grantee};"));
        }
        return out;
    }
    if role == GrantRole::Migration {
        out.push(format!(
            "GRANT CREATE, ALTER, INDEX, SELECT, INSERT, UPDATE, DELETE, CREATE ROUTINE, \
             ALTER ROUTINE ON {db}.* TO {grantee};"
        ));
        return out;
    }
    let all = tables();
    let (version_table, data) = all.split_last().expect("the version table");
    for table in data {
        let name = identifier(&format!("{}{table}", st.prefix()));
        out.push(format!(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON {db}.{name} TO {grantee};"
        ));
    }
    // The procedures run with the caller's privileges (`SQL SECURITY INVOKER`): the table
    // grants above, and the right to call them.
    for procedure in procedures() {
        let name = identifier(&format!("{}{procedure}", st.prefix()));
        out.push(format!(
            "GRANT EXECUTE ON PROCEDURE {db}.{name} TO {grantee};"
        ));
    }
    let name = identifier(&format!("{}{version_table}", st.prefix()));
    out.push(format!("GRANT SELECT ON {db}.{name} TO {grantee};"));
    out
}

/// The names (without prefix) of the stored procedures the migrations create.
fn procedures() -> impl Iterator<Item = &'static str> {
    MIGRATIONS
        .iter()
        .filter_map(|m| m.reverse.as_ref())
        .flat_map(|r| r.procedures.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_of_the_schema_is_listed_once() {
        let names = tables();
        assert_eq!(names.last(), Some(&"schema_migrations"));
        for expected in ["messages", "ready", "topic_log", "member_dead", "processes"] {
            assert_eq!(
                names.iter().filter(|n| **n == expected).count(),
                1,
                "{expected}"
            );
        }
        let creates: usize = MIGRATIONS
            .iter()
            .map(|m| {
                m.statements
                    .iter()
                    .filter(|s| s.starts_with(CREATE))
                    .count()
            })
            .sum();
        assert_eq!(names.len(), creates + 1);
    }

    #[test]
    fn names_and_hosts_are_quoted() {
        let st = Statements::new("sqlmq_");
        let grants = statements(&st, true, "app`db", GrantRole::Runtime, "o'brien", "%");
        assert!(grants[0].starts_with("GRANT SELECT, INSERT, UPDATE, DELETE ON `app``db`.`sqlmq_"));
        assert!(grants[0].ends_with("TO 'o\\'brien'@'%';"));
        assert!(grants.last().unwrap().starts_with("GRANT SELECT ON"));
        assert!(grants.contains(
            &"GRANT EXECUTE ON PROCEDURE `app``db`.`sqlmq_send` TO 'o\\'brien'@'%';".to_owned()
        ));
        let migration = statements(&st, true, "app", GrantRole::Migration, "m", "localhost");
        assert_eq!(
            migration,
            [
                "GRANT CREATE, ALTER, INDEX, SELECT, INSERT, UPDATE, DELETE, CREATE ROUTINE, \
                 ALTER ROUTINE ON `app`.* TO 'm'@'localhost';"
            ]
        );
    }

    #[test]
    fn notifications_read_the_binary_log_server_wide_in_each_flavour_s_words() {
        let st = Statements::new("sqlmq_");
        let on = |mariadb| statements(&st, mariadb, "app", GrantRole::Notifications, "a", "%");
        assert_eq!(
            on(true),
            ["GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'a'@'%';"]
        );
        assert_eq!(
            on(false),
            ["GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'a'@'%';"]
        );
    }

    #[test]
    fn monitoring_is_process_on_mysql_and_nothing_on_mariadb() {
        let st = Statements::new("sqlmq_");
        let on = |mariadb| statements(&st, mariadb, "app", GrantRole::Monitoring, "s", "%");
        assert_eq!(on(false), ["GRANT PROCESS ON *.* TO 's'@'%';"]);
        assert!(on(true).is_empty());
    }
}
