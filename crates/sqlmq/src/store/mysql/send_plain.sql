CREATE PROCEDURE IF NOT EXISTS {p}send_plain(
    IN p_id BINARY(16),
    IN p_queue INT,
    IN p_priority SMALLINT,
    IN p_headers BLOB,
    IN p_body LONGBLOB
)
MODIFIES SQL DATA
SQL SECURITY INVOKER
COMMENT 'sqlmq internal: the library''s send of one plain message, in a transaction of its own; not a contract (other languages call {p}send)'
BEGIN
    -- Only ever called outside a transaction, on a connection of sqlmq's own pool: its START
    -- TRANSACTION would commit a caller's. An error (a duplicate id) leaves the transaction
    -- open, and the caller rolls it back.
    START TRANSACTION;
    INSERT INTO {p}messages
        (id, queue_id, priority, ordering_key, idempotency_key, headers, body, created_at)
        VALUES (p_id, p_queue, p_priority, NULL, NULL, p_headers, p_body, UTC_TIMESTAMP(6));
    INSERT INTO {p}ready (queue_id, priority, id, attempts, token)
        VALUES (p_queue, p_priority, p_id, 0, 0);
    COMMIT;
END
