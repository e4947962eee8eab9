//! One suite, every backend: each scenario is written once, generic over [`TestBackend`]
//! (crate::TestBackend), and [`conformance!`](crate::conformance) instantiates it as one test per
//! backend.

/// Instantiate generic scenarios as tests, one module per backend (`mysql::<scenario>`,
/// `sqlite::<scenario>`):
/// `async` scenarios run on a multi-threaded runtime; `sync` ones are plain tests (the child
/// side of multi-process scenarios, which re-run the test binary with
/// `--exact <module>::<backend>::<name>`, see [`child_test`](crate::child_test)).
///
/// ```ignore
/// async fn sends_and_receives<B: TestBackend>() { /* … */ }
/// sqlmq_testkit::conformance!(async: [sends_and_receives]);
/// ```
#[macro_export]
macro_rules! conformance {
    (async: [$($a:ident),* $(,)?] $(, sync: [$($s:ident),* $(,)?])? $(,)?) => {
        $crate::conformance!(@backend mysql, sqlx::MySql, "MySQL/MariaDB",
            [$($a),*], [$($($s),*)?]);
        $crate::conformance!(@backend sqlite, sqlx::Sqlite, "SQLite",
            [$($a),*], [$($($s),*)?]);
    };
    (@backend $module:ident, $backend:ty, $label:literal, [$($a:ident),*], [$($s:ident),*]) => {
        #[doc = concat!("The scenarios of this module on ", $label, ".")]
        mod $module {
            $(
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

/// The `--exact` filter of the child test `name` of module `module` for backend `B`, for
/// scenarios that run this test binary again as a worker process.
pub fn child_test<B: sqlmq::Backend>(module: &str, name: &str) -> String {
    format!("{module}::{}::{name}", B::SCHEME)
}
