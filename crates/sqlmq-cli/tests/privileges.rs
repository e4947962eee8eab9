//! Least privilege through the CLI: the binary runs as a user without DDL rights (every CLI
//! test does, see `sqlmq-testkit`); `sqlmq migrate` as that user says which privilege is
//! missing and who should migrate; `sqlmq grants` prints statements the server accepts.

mod common;

use common::TestDb;

#[test]
fn migrate_as_the_runtime_user_names_the_missing_privilege_and_the_way_out() {
    let db = TestDb::unmigrated();
    let err = db.fails(&["migrate"], 1, "permission denied");
    assert!(err.contains("CREATE command denied"), "{err}");
    assert!(err.contains("sqlmq grants --migration"), "{err}");
    // Other commands on the unmigrated database still say to migrate first.
    db.fails(&["queues"], 1, "sqlmq migrate");
    // Migrated by the admin, the runtime user's migrate is a no-op and everything works.
    db.migrate();
    assert!(db.ok(&["migrate"]).contains("already up to date"));
    db.ok(&["queue", "create", "q"]);
    db.ok(&["send", "q", "hello"]);
    assert!(db.ok(&["recv", "q", "--ack"]).contains("hello"));
}

#[test]
fn grants_prints_one_statement_per_table_for_the_runtime_user() {
    let db = TestDb::new();
    let out = db.ok(&["grants", "--user", "app"]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.len() > 20, "{out}");
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("GRANT ") && l.ends_with("TO 'app'@'%';"))
    );
    assert!(
        out.contains(&format!("ON `{}`.`sqlmq_messages`", db.name)),
        "{out}"
    );
    assert!(!out.contains("CREATE"), "{out}");
    // Calling the send procedure (the guide, "Sending from SQL").
    assert!(
        out.contains(&format!(
            "GRANT EXECUTE ON PROCEDURE `{}`.`sqlmq_send` TO 'app'@'%';",
            db.name
        )),
        "{out}"
    );
    // The library's own send of one message, claim and ack of one receipt, ack of one group
    // receipt; the SQL contract's ack (the guide, "Acking from SQL").
    for procedure in [
        "sqlmq_send_plain",
        "sqlmq_claim_plain",
        "sqlmq_ack_plain",
        "sqlmq_ack_group_one",
        "sqlmq_ack",
    ] {
        assert!(
            out.contains(&format!(
                "GRANT EXECUTE ON PROCEDURE `{}`.`{procedure}` TO 'app'@'%';",
                db.name
            )),
            "{out}"
        );
    }
    let migration = db.ok(&[
        "grants",
        "--migration",
        "--user",
        "deploy",
        "--host",
        "10.0.%",
    ]);
    assert_eq!(
        migration.trim(),
        format!(
            "GRANT CREATE, ALTER, INDEX, SELECT, INSERT, UPDATE, DELETE, CREATE ROUTINE, \
             ALTER ROUTINE ON `{}`.* TO 'deploy'@'10.0.%';",
            db.name
        )
    );
}

/// `--monitoring`: what reading InnoDB's history list length needs besides. MariaDB (the test
/// server) reports it to every user, so nothing, and it says so; on MySQL it is PROCESS.
#[test]
fn grants_for_monitoring_are_nothing_on_mariadb_and_process_on_mysql() {
    let db = TestDb::new();
    let out = db.run(&["grants", "--monitoring", "--user", "serve"]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let version = sqlmq_testkit::admin("SELECT VERSION()").join("");
    if version.contains("MariaDB") {
        assert!(stdout.trim().is_empty(), "{stdout}");
        assert!(stderr.contains("nothing to grant"), "{stderr}");
    } else {
        assert_eq!(stdout.trim(), "GRANT PROCESS ON *.* TO 'serve'@'%';");
    }
}
