//! Following SQLite's commits: every commit writes the database's write-ahead log (or, in a
//! rollback-journal mode, the database file), so a change to either file, seen through the
//! operating system's file notifications (inotify, kqueue, FSEvents), means "probe now".
//!
//! The file does not say which queue changed, so each report is [`Change::Any`]: the receiver
//! probes all its sources in one statement. A burst of changes is reported a moment after it
//! starts and again after the files have been quiet for 50 ms and for 500 ms, since the sync
//! that makes a commit visible to readers comes after its last write and marks no event. Writes of this very process are reported too (a
//! probe that finds nothing costs one read). An in-memory database has no file, and no writer
//! but this process, whose commits wake its waiters directly: it is live at once and reports
//! nothing.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Pool, Sqlite};

use super::SqliteStore;
use crate::store::follow::{Change, Follow, FollowEnd, Followed};

/// How long after a first change the follower waits before reporting: a commit is several
/// writes, and a reader woken by the first could start its snapshot before the last.
const SETTLE: Duration = Duration::from_millis(3);
/// After the news, how long the files stay quiet before it is said again (each time): the
/// sync that makes a commit visible can take a while on a busy disk.
const TRAIL: [Duration; 2] = [Duration::from_millis(50), Duration::from_millis(500)];

impl Follow for sqlx::Sqlite {
    async fn follow(
        _store: &SqliteStore,
        _pool: &Pool<Sqlite>,
        url: &str,
        report: &(dyn Fn(Followed) + Send + Sync),
    ) -> FollowEnd {
        if super::connect::in_memory(url) {
            report(Followed::Live);
            return std::future::pending().await;
        }
        let file = match SqliteConnectOptions::from_str(url) {
            Ok(o) => o.get_filename().to_path_buf(),
            Err(e) => return FollowEnd::Off(format!("invalid database URL: {e}")),
        };
        let file = std::fs::canonicalize(&file).unwrap_or(file);
        let Some(dir) = file.parent().map(Path::to_path_buf) else {
            return FollowEnd::Off(format!("{} has no directory to watch", file.display()));
        };
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
        let Some(name) = name else {
            return FollowEnd::Off(format!("{} is not a file", file.display()));
        };
        // The watcher calls back on a thread of its own; the channel brings the news here.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let wal = format!("{name}-wal");
        let watched = move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else { return };
            if !matches!(event.kind, EventKind::Modify(_) | EventKind::Create(_)) {
                return;
            }
            let ours = event.paths.iter().any(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_str() == Some(&name) || n.to_str() == Some(&wal))
            });
            if ours {
                let _ = tx.send(());
            }
        };
        let mut watcher = match notify::recommended_watcher(watched) {
            Ok(w) => w,
            Err(e) => return FollowEnd::Off(format!("file notifications are unavailable: {e}")),
        };
        if let Err(e) = watcher.watch(&dir, RecursiveMode::NonRecursive) {
            return FollowEnd::Off(format!("cannot watch {}: {e}", dir.display()));
        }
        report(Followed::Live);
        let stopped = || FollowEnd::Lost("the file watcher stopped".into());
        loop {
            if rx.recv().await.is_none() {
                return stopped();
            }
            // News, until the files have been quiet through every trailing pause.
            'burst: loop {
                tokio::time::sleep(SETTLE).await;
                // Everything that came meanwhile is the same news.
                while rx.try_recv().is_ok() {}
                report(Followed::Change(Change::Any));
                // A commit becomes visible only after its last write is synced, which no file
                // event marks: say it again once the files have been quiet a while.
                for quiet in TRAIL {
                    tokio::select! {
                        more = rx.recv() => match more {
                            Some(()) => continue 'burst,
                            None => return stopped(),
                        },
                        _ = tokio::time::sleep(quiet) => report(Followed::Change(Change::Any)),
                    }
                }
                break;
            }
        }
    }
}
