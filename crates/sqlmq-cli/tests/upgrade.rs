//! Upgrades through the CLI: `sqlmq migrate --to` takes the schema back to an earlier version
//! and up again, and refuses, dropping nothing, when a table it would drop holds rows.

mod common;

use common::TestDb;

#[test]
fn migrate_to_goes_down_refuses_to_lose_rows_and_comes_back_up() {
    let db = TestDb::new();
    let latest = db.json(&["migrate", "--json"])["to_version"]
        .as_i64()
        .unwrap();
    let older = (latest - 1).to_string();
    let out = db.run_as_admin(&["migrate", "--to", &older]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("schema at version {older} (reverted: {latest})")),
        "{stdout}"
    );
    // This sqlmq needs the newer schema back.
    db.fails(&["queues"], 1, "sqlmq migrate");
    let out = db.run_as_admin(&["migrate"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("applied: {latest}")));

    db.ok(&["queue", "create", "q"]);
    db.ok(&["send", "q", "hello"]);
    let out = db.run_as_admin(&["migrate", "--to", "0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("holds rows"), "{stderr}");
    let out = db.run_as_admin(&["migrate", "--to", &(latest + 1).to_string()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        db.ok(&["recv", "q", "--ack"]).contains("hello"),
        "nothing was dropped"
    );
}
