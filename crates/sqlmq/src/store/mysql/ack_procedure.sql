CREATE PROCEDURE IF NOT EXISTS {p}ack(
    IN p_queue VARCHAR(1024),
    IN p_receipt VARCHAR(1024)
)
MODIFIES SQL DATA
SQL SECURITY INVOKER
COMMENT 'sqlmq: ack one receipt, in the caller''s transaction or alone'
BEGIN
    -- The SQL contract's ack (README, "Acking from SQL"): a handler in any language acks its
    -- receipt (`ID:TOKEN`, as the CLI, the HTTP API and SQLMQ_RECEIPT give it) in the same
    -- transaction as its writes, which then commit together or not at all. It answers one row,
    -- `acked` = 1, or raises an error and writes nothing: a bad argument (22023, 22004), an
    -- unknown queue (42S02), a receipt that no longer holds its lease (45000: roll back, the
    -- message is someone else's now or back in the queue), or a message with an ordering key,
    -- a concurrency key, or in a batch or workflow (0A000: ack it through the library, whose
    -- ack releases the key or records the flow's progress).
    --
    -- One statement writes: the lease and the message deleted together by the lease row's
    -- primary key, under the fencing check, as the library's own lone ack does (ack_plain.sql);
    -- its lock serialises this ack with the expiry sweep and with another holder's ack. Inside a
    -- transaction it is part of it; outside one it commits by itself.
    DECLARE v_queue INT;
    DECLARE v_hex CHAR(32);
    DECLARE v_id BINARY(16);
    DECLARE v_token BIGINT;
    DECLARE v_held INT DEFAULT 0;

    IF p_queue IS NULL OR p_receipt IS NULL THEN
        SIGNAL SQLSTATE '22004' SET MESSAGE_TEXT = '{p}ack: queue and receipt are required';
    END IF;
    -- ID:TOKEN, the id a UUID in its usual text form.
    IF p_receipt NOT REGEXP '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}:[0-9]{1,18}$' THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = '{p}ack: receipt must be ID:TOKEN (a message id and a fencing token)';
    END IF;
    SET v_hex = REPLACE(LEFT(p_receipt, 36), '-', '');
    SET v_id = UNHEX(v_hex);
    SET v_token = CAST(SUBSTRING(p_receipt, 38) AS SIGNED);
    SET v_queue = (SELECT id FROM {p}queues WHERE name = p_queue);
    IF v_queue IS NULL THEN
        SIGNAL SQLSTATE '42S02' SET MESSAGE_TEXT = '{p}ack: no queue of that name';
    END IF;

    DELETE l, m FROM {p}leases l STRAIGHT_JOIN {p}messages m ON m.id = l.id
        WHERE l.id = v_id AND l.token = v_token AND l.queue_id = v_queue
          AND l.lease_until > UTC_TIMESTAMP(6) AND l.ordering_key IS NULL;
    IF ROW_COUNT() = 0 THEN
        -- Locking, so the latest version: does the receipt hold its lease (of a message with a
        -- key or a flow, which the statement above leaves alone)?
        SELECT COUNT(*) INTO v_held FROM {p}leases
            WHERE id = v_id AND token = v_token AND queue_id = v_queue
              AND lease_until > UTC_TIMESTAMP(6) FOR UPDATE;
        IF v_held = 0 THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{p}ack: lease lost: the receipt''s lease ended or the message was claimed again; roll back';
        END IF;
        SIGNAL SQLSTATE '0A000' SET MESSAGE_TEXT = '{p}ack: the message has an ordering key, a concurrency key or a flow: ack it through the library';
    END IF;
    SELECT 1 AS acked;
END
