//! One suite, every backend: each scenario is written once, generic over [`TestBackend`]
//! (crate::TestBackend), and [`conformance!`](crate::conformance) instantiates it as one test per
//! backend.

/// Instantiate generic scenarios as tests, one module per backend the kit serves
/// (`mysql::<scenario>`, `sqlite::<scenario>`):
/// `async` scenarios run on a multi-threaded runtime; `sync` ones are plain tests (the child
/// side of multi-process scenarios, which re-run the test binary with
/// `--exact <module>::<backend>::<name>`, see [`child_test`](crate::child_test)).
///
/// ```ignore
/// async fn sends_and_receives<B: TestBackend>() { /* … */ }
/// sqlmq_testkit::conformance!(async: [sends_and_receives]);
/// ```
///
/// Attributes written before an async scenario's name go on each of its tests (an
/// `#[ignore = "why"]` for a known difference between backends, say):
///
/// ```ignore
/// sqlmq_testkit::conformance!(async: [#[ignore = "backends differ: …"] drifts]);
/// ```
#[macro_export]
macro_rules! conformance {
    (async: [$($(#[$m:meta])* $a:ident),* $(,)?] $(, sync: [$($s:ident),* $(,)?])? $(,)?) => {
        $crate::if_mysql! {
            $crate::conformance!(@backend mysql, sqlx::MySql, "MySQL/MariaDB",
                [$($(#[$m])* $a),*], [$($($s),*)?]);
        }
        $crate::if_sqlite! {
            $crate::conformance!(@backend sqlite, sqlx::Sqlite, "SQLite",
                [$($(#[$m])* $a),*], [$($($s),*)?]);
        }
    };
    (@backend $module:ident, $backend:ty, $label:literal, [$($(#[$m:meta])* $a:ident),*],
        [$($s:ident),*]) => {
        #[doc = concat!("The scenarios of this module on ", $label, ".")]
        mod $module {
            $(
                $(#[$m])*
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $a() {
                    super::$a::<$backend>().await
                }
            )*
            $(
                #[test]
                fn $s() {
                    super::$s::<$backend>()
                }
            )*
        }
    };
}

/// Its input when the kit serves MySQL/MariaDB (its feature `mysql`), else nothing: decided by
/// the kit's features, not by those of the crate the macro is used in.
#[cfg(feature = "mysql")]
#[doc(hidden)]
#[macro_export]
macro_rules! if_mysql {
    ($($t:tt)*) => { $($t)* };
}
#[cfg(not(feature = "mysql"))]
#[doc(hidden)]
#[macro_export]
macro_rules! if_mysql {
    ($($t:tt)*) => {};
}

/// Its input when the kit serves SQLite (its feature `sqlite`), else nothing.
#[cfg(feature = "sqlite")]
#[doc(hidden)]
#[macro_export]
macro_rules! if_sqlite {
    ($($t:tt)*) => { $($t)* };
}
#[cfg(not(feature = "sqlite"))]
#[doc(hidden)]
#[macro_export]
macro_rules! if_sqlite {
    ($($t:tt)*) => {};
}

/// The `--exact` filter of the child test `name` of module `module` for backend `B`, for
/// scenarios that run this test binary again as a worker process.
pub fn child_test<B: sqlmq::Backend>(module: &str, name: &str) -> String {
    format!("{module}::{}::{name}", B::SCHEME)
}
