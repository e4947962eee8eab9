//! One Python class over both backends: the library's handles are generic over the backend
//! (`Client<MySql>`, `Client<Sqlite>`), Python's classes are not, so each class holds an enum of
//! the two and runs the same code on either through [`both!`]. The URL's scheme picks the
//! backend, as in the CLI.

use sqlmq::{MySql, Sqlite};

/// A client of either backend.
#[derive(Clone)]
pub(crate) enum AnyClient {
    MySql(sqlmq::Client<MySql>),
    Sqlite(sqlmq::Client<Sqlite>),
}

/// A queue of either backend.
#[derive(Clone)]
pub(crate) enum AnyQueue {
    MySql(sqlmq::Queue<MySql>),
    Sqlite(sqlmq::Queue<Sqlite>),
}

/// A topic of either backend.
#[derive(Clone)]
pub(crate) enum AnyTopic {
    MySql(sqlmq::Topic<MySql>),
    Sqlite(sqlmq::Topic<Sqlite>),
}

/// A consumer group of either backend.
#[derive(Clone)]
pub(crate) enum AnyGroup {
    MySql(sqlmq::Group<MySql>),
    Sqlite(sqlmq::Group<Sqlite>),
}

/// Run `$body` with `$h` bound to the handle inside `$any` — an [`AnyClient`], or with `queue`,
/// `topic` or `group` first an [`AnyQueue`], [`AnyTopic`] or [`AnyGroup`] — whichever backend it
/// is of.
macro_rules! both {
    // (First: `queue x` would otherwise parse as the expression `queue & x`.)
    (queue $any:expr, $h:ident => $body:expr) => {
        match $any {
            $crate::backend::AnyQueue::MySql($h) => $body,
            $crate::backend::AnyQueue::Sqlite($h) => $body,
        }
    };
    (topic $any:expr, $h:ident => $body:expr) => {
        match $any {
            $crate::backend::AnyTopic::MySql($h) => $body,
            $crate::backend::AnyTopic::Sqlite($h) => $body,
        }
    };
    (group $any:expr, $h:ident => $body:expr) => {
        match $any {
            $crate::backend::AnyGroup::MySql($h) => $body,
            $crate::backend::AnyGroup::Sqlite($h) => $body,
        }
    };
    ($any:expr, $h:ident => $body:expr) => {
        match $any {
            $crate::backend::AnyClient::MySql($h) => $body,
            $crate::backend::AnyClient::Sqlite($h) => $body,
        }
    };
}
pub(crate) use both;

/// Whether `url` names SQLite (`sqlite://…`, `sqlite::memory:`); anything else is MySQL/MariaDB.
pub(crate) fn is_sqlite(url: &str) -> bool {
    url.starts_with("sqlite:")
}

/// A library handle of either backend as the matching enum.
pub(crate) trait Any<T> {
    fn any(self) -> T;
}

/// `Any` for a handle type of both backends.
macro_rules! any {
    ($handle:ident, $any:ident) => {
        impl Any<$any> for sqlmq::$handle<MySql> {
            fn any(self) -> $any {
                $any::MySql(self)
            }
        }
        impl Any<$any> for sqlmq::$handle<Sqlite> {
            fn any(self) -> $any {
                $any::Sqlite(self)
            }
        }
    };
}
any!(Queue, AnyQueue);
any!(Topic, AnyTopic);
any!(Group, AnyGroup);
