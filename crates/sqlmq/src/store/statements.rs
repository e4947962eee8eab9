//! Prepared-statement texts: table prefix expansion and bucketed list sizes.
//!
//! Table names cannot be bound, so every statement is a template in which `{p}` stands for the
//! table prefix (validated to `[A-Za-z0-9_]{0,32}`, the only text ever spliced into SQL). Lists of
//! variable length (`IN (…)`, multi-row `VALUES`) are expanded for a small set of sizes only:
//! every distinct text is a server-side prepared statement in each connection's cache, and an
//! unbounded set would churn that cache (each eviction costs a `COM_STMT_CLOSE`, and with sqlx
//! 0.9.0 a back-to-back write that can stall 40 ms, see `nodelay.rs`). `IN` lists are padded up
//! to the next bucket by repeating their last element; `VALUES` lists are split into buckets.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sqlx::{AssertSqlSafe, SqlSafeStr, SqlStr};

/// One row of an id derived table.
///
/// Why derived tables: MariaDB plans `DELETE … WHERE pk IN (…)` (and the row-constructor form)
/// as a full table scan when its statistics say the table is small, which a queue table that
/// was empty a moment ago often is; under load that scan locks rows it should never touch. A
/// `DELETE t FROM (<ids>) v STRAIGHT_JOIN t ON t.pk = v.id` is always driven by the list and
/// reads `t` by primary key (`eq_ref`), whatever the statistics say. The casts give the bound
/// parameters the column's type, so that MySQL, which types parameters at prepare time, can use
/// the index too. Verified by `store/mysql/plans.rs`.
pub(crate) const ID_ROW: &str = "SELECT CAST(? AS BINARY) AS id";

/// Largest list a single statement carries.
pub(crate) const MAX_LIST: usize = 1024;

/// Exact list sizes up to this, powers of two above.
const EXACT_UP_TO: usize = 16;

/// The list size a statement for `n` elements is prepared with: `n` itself up to 16, else the next
/// power of two (at most [`MAX_LIST`]).
pub(crate) fn bucket(n: usize) -> usize {
    debug_assert!(n > 0 && n <= MAX_LIST);
    if n <= EXACT_UP_TO {
        n
    } else {
        n.next_power_of_two().min(MAX_LIST)
    }
}

/// Split `n` rows into chunk sizes that are all buckets (largest first), each at most `max`.
pub(crate) fn split_into_buckets(mut n: usize, max: usize) -> Vec<usize> {
    let max = max.clamp(1, MAX_LIST);
    let mut out = Vec::new();
    while n > 0 {
        let take = if n <= EXACT_UP_TO.min(max) {
            n
        } else {
            // the largest power of two that fits both n and max
            let p = 1usize << (usize::BITS - 1 - n.min(max).leading_zeros());
            p.max(1)
        };
        out.push(take);
        n -= take;
    }
    out
}

/// The end of the run of items that starts at `start` and goes in one statement: at most
/// `max_items` items of `len`, and at most `budget` bytes by `bytes` (each item's estimate) —
/// but at least one item, which its own checks (the payload limit) keep below the budget.
pub(crate) fn run_within(
    start: usize,
    len: usize,
    max_items: usize,
    budget: usize,
    bytes: impl Fn(usize) -> usize,
) -> usize {
    let mut end = start;
    let mut total = 0;
    while end < len && end - start < max_items {
        let b = bytes(end);
        if end > start && total + b > budget {
            break;
        }
        total += b;
        end += 1;
    }
    end
}

/// `chunk` padded to its bucket size by repeating its last element: for `IN` lists, where a
/// repeated element changes nothing, so that the statement texts stay few.
pub(crate) fn padded<T>(chunk: &[T]) -> impl Iterator<Item = &T> {
    (0..bucket(chunk.len())).map(move |i| &chunk[i.min(chunk.len() - 1)])
}

/// Expanded texts by (template address, template length, list size).
type StatementCache = HashMap<(usize, usize, usize), SqlStr>;

/// Expanded statement texts for one table prefix, built once and shared.
#[derive(Clone)]
pub(crate) struct Statements {
    prefix: Arc<str>,
    cache: Arc<Mutex<StatementCache>>,
}

impl Statements {
    pub(crate) fn new(prefix: &str) -> Statements {
        Statements {
            prefix: prefix.into(),
            cache: Arc::default(),
        }
    }

    /// The table prefix.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `template` with `{p}` replaced by the table prefix.
    pub(crate) fn get(&self, template: &'static str) -> SqlStr {
        self.cached(template, 0, || template.replace("{p}", &self.prefix))
    }

    /// `template` with `{p}` replaced and its list placeholder expanded for `n` elements
    /// (`n` must be a bucket size):
    ///
    /// - `{list}`: `n` copies of `item` joined by commas (`IN (…)`, `VALUES …`);
    /// - `{rows}`: `n` copies of `item`, a `SELECT` of bound values, joined by `UNION ALL`: a
    ///   derived table of the values, to drive a `STRAIGHT_JOIN` (see [`ID_ROW`]);
    /// - `{ids}`: `{rows}` of [`ID_ROW`].
    pub(crate) fn list(&self, template: &'static str, item: &str, n: usize) -> SqlStr {
        debug_assert_eq!(bucket(n), n, "list sizes must be buckets");
        self.cached(template, n, || self.list_text(template, item, n))
    }

    /// Like [`Statements::list`] for any `n`, uncached: for statements sent as text, whose
    /// values are rendered into them (the server does not prepare them, so their sizes need
    /// not be few).
    pub(crate) fn list_text(&self, template: &'static str, item: &str, n: usize) -> String {
        template
            .replace("{p}", &self.prefix)
            .replace("{list}", &vec![item; n].join(","))
            .replace("{rows}", &vec![item; n].join(" UNION ALL "))
            .replace("{ids}", &vec![ID_ROW; n].join(" UNION ALL "))
    }

    fn cached(&self, template: &'static str, n: usize, build: impl FnOnce() -> String) -> SqlStr {
        // Keyed by the template's address and length: templates are `'static` strings; two
        // literals the compiler merged are equal texts, so sharing their expansion is right.
        let key = (template.as_ptr() as usize, template.len(), n);
        let mut cache = self.cache.lock().expect("statement cache poisoned");
        cache
            .entry(key)
            .or_insert_with(|| AssertSqlSafe(build()).into_sql_str())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_exact_then_powers_of_two() {
        assert_eq!(bucket(1), 1);
        assert_eq!(bucket(16), 16);
        assert_eq!(bucket(17), 32);
        assert_eq!(bucket(600), 1024);
        assert_eq!(bucket(1024), 1024);
    }

    #[test]
    fn splits_cover_n_with_buckets_only() {
        for n in [1, 7, 16, 17, 100, 1000, 1024, 1025, 100_000] {
            for max in [1, 10, 64, 1024] {
                let parts = split_into_buckets(n, max);
                assert_eq!(parts.iter().sum::<usize>(), n, "n={n} max={max}");
                assert!(
                    parts.iter().all(|&p| bucket(p) == p && p <= max),
                    "{parts:?}"
                );
            }
        }
        assert_eq!(split_into_buckets(100, 1024), vec![64, 32, 4]);
    }

    #[test]
    fn runs_stay_within_budget_and_take_at_least_one() {
        let sizes = [40, 40, 40, 200, 10];
        let end = |start, max, budget| run_within(start, sizes.len(), max, budget, |i| sizes[i]);
        assert_eq!(end(0, 10, 100), 2);
        assert_eq!(end(2, 10, 100), 3);
        assert_eq!(end(3, 10, 100), 4);
        assert_eq!(end(0, 1, 1000), 1);
        assert_eq!(end(4, 10, 100), 5);
    }

    #[test]
    fn expands_prefix_and_lists() {
        static T: &str = "DELETE FROM {p}ready WHERE id IN ({list})";
        let s = Statements::new("app_");
        assert_eq!(
            s.list(T, "?", 3).as_str(),
            "DELETE FROM app_ready WHERE id IN (?,?,?)"
        );
        assert_eq!(
            s.get("SELECT 1 FROM {p}queues").as_str(),
            "SELECT 1 FROM app_queues"
        );
        static U: &str = "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}ready t ON t.id = v.id";
        assert_eq!(
            s.list(U, "", 2).as_str(),
            "DELETE t FROM (SELECT CAST(? AS BINARY) AS id UNION ALL SELECT CAST(? AS BINARY) AS id) v \
             STRAIGHT_JOIN app_ready t ON t.id = v.id"
        );
    }
}
