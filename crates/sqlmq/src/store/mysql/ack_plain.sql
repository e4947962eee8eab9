CREATE PROCEDURE IF NOT EXISTS {p}ack_plain(
    IN p_queue INT,
    IN p_id BINARY(16),
    IN p_token BIGINT
)
MODIFIES SQL DATA
SQL SECURITY INVOKER
COMMENT 'sqlmq internal: the library''s ack of one receipt, in a transaction of its own; not a contract'
BEGIN
    -- Only ever called outside a transaction, on a connection of sqlmq's own pool (see
    -- {p}claim_plain). Answers one row, after its COMMIT: 1 acked; 0 the receipt does not hold
    -- its lease (nothing written); 2 it holds it, but the message has a key to release
    -- (nothing written: the caller acks it with the full ack, `store/body/settle.rs`).
    DECLARE v_held INT DEFAULT 0;
    START TRANSACTION;
    -- The lease row first (a join in that order): its lock serialises this ack with the expiry
    -- sweep and with another holder's ack, as the full ack's locking read does.
    DELETE l, m FROM {p}leases l STRAIGHT_JOIN {p}messages m ON m.id = l.id
        WHERE l.id = p_id AND l.token = p_token AND l.queue_id = p_queue
          AND l.lease_until > UTC_TIMESTAMP(6) AND l.ordering_key IS NULL;
    IF ROW_COUNT() > 0 THEN
        COMMIT;
        SELECT 1;
    ELSE
        -- Locking, so the latest version (see claim_plain.sql).
        SELECT COUNT(*) INTO v_held FROM {p}leases
            WHERE id = p_id AND token = p_token AND queue_id = p_queue
              AND lease_until > UTC_TIMESTAMP(6) FOR UPDATE;
        COMMIT;
        SELECT 2 * v_held;
    END IF;
END
