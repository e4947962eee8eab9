//! The log reads and broadcast positions' statements (the body is `store/body/stream.rs`).
//! They run on the reader connections; times are stored as integers (µs).

use super::now_us;
use crate::store::body::StreamSql;

macro_rules! record_columns {
    () => {
        "SELECT partition_no, msg_offset, id, msg_key, headers, body, published_at, \
         sequenced_at FROM {p}topic_log "
    };
}

pub(super) const SQL: StreamSql = StreamSql {
    read_from: concat!(
        record_columns!(),
        "WHERE topic_id = ? AND partition_no = ? AND msg_offset >= ? ORDER BY msg_offset LIMIT ?"
    ),
    record_by_id: concat!(record_columns!(), "WHERE id = ? AND topic_id = ?"),
    records_by_key: concat!(
        record_columns!(),
        "WHERE topic_id = ? AND msg_key = ? ORDER BY partition_no, msg_offset LIMIT ?"
    ),
    sequenced_at: "SELECT sequenced_at FROM {p}topic_log \
        WHERE topic_id = ? AND partition_no = ? AND msg_offset = ?",
    all_positions: "SELECT member, partition_no, next_offset, updated_at \
        FROM {p}group_positions WHERE group_id = ? ORDER BY member, partition_no",
    save_positions: "INSERT INTO {p}group_positions \
        (group_id, member, partition_no, next_offset, updated_at) VALUES {list} \
        ON CONFLICT (group_id, member, partition_no) DO UPDATE SET \
        next_offset = excluded.next_offset, updated_at = excluded.updated_at",
    position_row: concat!("(?,?,?,?,", now_us!(), ")"),
};
