//! The log reads and broadcast positions' statements (the body is `store/body/stream.rs`).
//! Each read names its index (`FORCE INDEX`), so that the plan never depends on statistics
//! (`plans_topics.rs`).

use super::micros;
use crate::store::body::StreamSql;

macro_rules! record_columns {
    () => {
        concat!(
            "SELECT partition_no, msg_offset, id, msg_key, headers, body, ",
            micros!("published_at"),
            ", ",
            micros!("sequenced_at"),
            " FROM {p}topic_log "
        )
    };
}

pub(super) const SQL: StreamSql = StreamSql {
    read_from: concat!(
        record_columns!(),
        "FORCE INDEX (PRIMARY) WHERE topic_id = ? AND partition_no = ? AND msg_offset >= ? ",
        "ORDER BY msg_offset LIMIT ?"
    ),
    record_by_id: concat!(
        record_columns!(),
        "FORCE INDEX (id) WHERE id = ? AND topic_id = ?"
    ),
    records_by_key: concat!(
        record_columns!(),
        "FORCE INDEX (by_key) WHERE topic_id = ? AND msg_key = ? ",
        "ORDER BY partition_no, msg_offset LIMIT ?"
    ),
    sequenced_at: concat!(
        "SELECT ",
        micros!("sequenced_at"),
        " FROM {p}topic_log WHERE topic_id = ? AND partition_no = ? AND msg_offset = ?"
    ),
    all_positions: concat!(
        "SELECT member, partition_no, next_offset, ",
        micros!("updated_at"),
        " FROM {p}group_positions WHERE group_id = ? ORDER BY member, partition_no"
    ),
    save_positions: "INSERT INTO {p}group_positions \
        (group_id, member, partition_no, next_offset, updated_at) VALUES {list} \
        ON DUPLICATE KEY UPDATE next_offset = VALUES(next_offset), updated_at = VALUES(updated_at)",
    position_row: "(?,?,?,?,UTC_TIMESTAMP(6))",
};
