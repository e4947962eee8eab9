CREATE PROCEDURE IF NOT EXISTS {p}send(
    IN p_queue VARCHAR(1024),
    IN p_body LONGBLOB,
    IN p_id VARBINARY(1024),
    IN p_priority INT,
    IN p_delay_ms BIGINT,
    IN p_ordering_key VARBINARY(1024),
    IN p_idempotency_key VARBINARY(1024),
    IN p_headers LONGBLOB
)
MODIFIES SQL DATA
SQL SECURITY INVOKER
COMMENT 'sqlmq: send one message, in the caller''s transaction or one of its own'
BEGIN
    DECLARE v_queue INT;
    DECLARE v_window BIGINT;
    DECLARE v_id BINARY(16);
    DECLARE v_priority SMALLINT DEFAULT 0;
    DECLARE v_delay_us BIGINT DEFAULT 0;
    DECLARE v_rand CHAR(40);
    DECLARE v_own TINYINT DEFAULT 0;
    DECLARE v_dup TINYINT DEFAULT 0;
    DECLARE v_taken TINYINT DEFAULT 0;
    DECLARE v_prior BINARY(16);
    DECLARE v_open TINYINT;
    DECLARE v_seq BIGINT;
    DECLARE v_head BINARY(16);
    -- 0: nothing written yet; 1: in a transaction of its own; 2: after its savepoint in the
    -- caller's.
    DECLARE v_stage TINYINT DEFAULT 0;
    DECLARE v_i INT DEFAULT 0;
    DECLARE v_values LONGTEXT;
    -- Any error: undo what this call wrote (its own transaction, or back to its savepoint in
    -- the caller's), then raise it again unchanged.
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        IF v_stage = 1 THEN
            ROLLBACK;
        ELSEIF v_stage = 2 THEN
            ROLLBACK TO SAVEPOINT sqlmq_send;
        END IF;
        RESIGNAL;
    END;

    -- Arguments first: a bad one writes nothing.
    IF p_body IS NULL THEN
        SIGNAL SQLSTATE '22004' SET MESSAGE_TEXT = '{p}send: body is NULL';
    END IF;
    IF p_priority IS NOT NULL THEN
        IF p_priority NOT BETWEEN -32768 AND 32767 THEN
            SIGNAL SQLSTATE '22003' SET MESSAGE_TEXT = '{p}send: priority is outside -32768..32767';
        END IF;
        SET v_priority = p_priority;
    END IF;
    IF p_delay_ms IS NOT NULL THEN
        IF p_delay_ms NOT BETWEEN 0 AND 316224000000 THEN
            SIGNAL SQLSTATE '22003' SET MESSAGE_TEXT = '{p}send: delay_ms is outside 0..316224000000 (10 years)';
        END IF;
        SET v_delay_us = p_delay_ms * 1000;
    END IF;
    IF p_ordering_key IS NOT NULL AND (LENGTH(p_ordering_key) NOT BETWEEN 1 AND 128
            OR CONVERT(CONVERT(p_ordering_key USING utf8mb4) USING binary) <> p_ordering_key
            OR CONVERT(p_ordering_key USING utf8mb4) REGEXP '[[:cntrl:]]') THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = '{p}send: ordering_key must be 1 to 128 bytes of UTF-8 without control characters';
    END IF;
    IF p_idempotency_key IS NOT NULL AND (LENGTH(p_idempotency_key) NOT BETWEEN 1 AND 128
            OR CONVERT(CONVERT(p_idempotency_key USING utf8mb4) USING binary) <> p_idempotency_key
            OR CONVERT(p_idempotency_key USING utf8mb4) REGEXP '[[:cntrl:]]') THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = '{p}send: idempotency_key must be 1 to 128 bytes of UTF-8 without control characters';
    END IF;
    IF p_headers IS NOT NULL THEN
        IF LENGTH(p_headers) > 61440 OR JSON_VALID(p_headers) = 0
                OR JSON_TYPE(p_headers) <> 'OBJECT' THEN
            SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = '{p}send: headers must be a JSON object of strings, at most 61440 bytes';
        END IF;
        SET v_values = JSON_EXTRACT(p_headers, '$.*');
        WHILE v_i < COALESCE(JSON_LENGTH(v_values), 0) DO
            IF JSON_TYPE(JSON_EXTRACT(v_values, CONCAT('$[', v_i, ']'))) <> 'STRING' THEN
                SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = '{p}send: headers must be a JSON object of strings, at most 61440 bytes';
            END IF;
            SET v_i = v_i + 1;
        END WHILE;
    END IF;
    IF p_id IS NULL THEN
        -- A UUIDv7: milliseconds since the epoch, then random bits, as the library's ids.
        SET v_rand = SHA1(CONCAT(UUID(), RAND()));
        SET v_id = UNHEX(CONCAT(
            LPAD(HEX(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) DIV 1000), 12, '0'),
            '7', SUBSTR(v_rand, 1, 3),
            HEX(8 + CONV(SUBSTR(v_rand, 4, 1), 16, 10) % 4), SUBSTR(v_rand, 5, 15)));
    ELSEIF LENGTH(p_id) <> 16 THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = '{p}send: id must be 16 bytes (a UUID) or NULL';
    ELSE
        SET v_id = p_id;
    END IF;
    SET v_queue = (SELECT id FROM {p}queues WHERE name = p_queue);
    IF v_queue IS NULL THEN
        SIGNAL SQLSTATE '42S02' SET MESSAGE_TEXT = '{p}send: no queue of that name (create it with `sqlmq queue create`)';
    END IF;

    -- In the caller's transaction, or one of our own: a savepoint outside a transaction lasts
    -- only as long as its statement, so releasing it fails exactly when there is none.
    SAVEPOINT sqlmq_send;
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1305 SET v_own = 1;
        RELEASE SAVEPOINT sqlmq_send;
    END;
    IF v_own = 1 THEN
        START TRANSACTION;
        SET v_stage = 1;
    ELSE
        SAVEPOINT sqlmq_send;
        SET v_stage = 2;
    END IF;
    IF p_idempotency_key IS NOT NULL THEN
        -- The key is recorded first, so that a concurrent sender of the same key waits on its
        -- row lock and then finds it taken.
        SET v_window = (SELECT dedup_window_ms FROM {p}queues WHERE id = v_queue);
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1062 SET v_taken = 1;
            INSERT INTO {p}dedup (queue_id, idempotency_key, id, expires_at) VALUES
                (v_queue, p_idempotency_key, v_id,
                 DATE_ADD(UTC_TIMESTAMP(6), INTERVAL v_window * 1000 MICROSECOND));
        END;
        IF v_taken = 1 THEN
            -- A shared lock, as the failed INSERT's duplicate check took: concurrent senders
            -- of the key read the winner's row together instead of deadlocking on it.
            SELECT id, expires_at > UTC_TIMESTAMP(6) INTO v_prior, v_open FROM {p}dedup
                WHERE queue_id = v_queue AND idempotency_key = p_idempotency_key
                LOCK IN SHARE MODE;
            IF v_prior <> v_id AND v_open = 1 THEN
                SET v_id = v_prior, v_dup = 1;
            ELSEIF v_prior <> v_id THEN
                UPDATE {p}dedup SET id = v_id,
                    expires_at = DATE_ADD(UTC_TIMESTAMP(6), INTERVAL v_window * 1000 MICROSECOND)
                    WHERE queue_id = v_queue AND idempotency_key = p_idempotency_key;
            END IF;
        END IF;
    END IF;
    IF v_dup = 0 THEN
        -- An id stored already is a resend: nothing is written, the answer is the same id.
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1062 SET v_dup = 1;
            INSERT INTO {p}messages
                (id, queue_id, priority, ordering_key, idempotency_key, headers, body, created_at)
                VALUES (v_id, v_queue, v_priority, p_ordering_key, p_idempotency_key,
                        p_headers, p_body, UTC_TIMESTAMP(6));
        END;
    END IF;
    IF v_dup = 0 AND p_ordering_key IS NOT NULL THEN
        -- In line behind the key's earlier messages, if it has any (the key protocol of the
        -- library: the head is the one message of the key outside `blocked`).
        INSERT INTO {p}key_heads (queue_id, ordering_key, next_seq, head_id)
            VALUES (v_queue, p_ordering_key, 1, v_id)
            ON DUPLICATE KEY UPDATE next_seq = next_seq + 1;
        SELECT next_seq, head_id INTO v_seq, v_head FROM {p}key_heads
            WHERE queue_id = v_queue AND ordering_key = p_ordering_key;
        IF v_head <> v_id THEN
            INSERT INTO {p}blocked
                (queue_id, ordering_key, seq, id, priority, run_at, attempts, token)
                VALUES (v_queue, p_ordering_key, v_seq, v_id, v_priority,
                        DATE_ADD(UTC_TIMESTAMP(6), INTERVAL v_delay_us MICROSECOND), 0, 0);
            SET v_dup = 2;
        END IF;
    END IF;
    IF v_dup = 0 AND v_delay_us > 0 THEN
        INSERT INTO {p}scheduled (id, queue_id, priority, run_at, attempts, token)
            VALUES (v_id, v_queue, v_priority,
                    DATE_ADD(UTC_TIMESTAMP(6), INTERVAL v_delay_us MICROSECOND), 0, 0);
    ELSEIF v_dup = 0 THEN
        INSERT INTO {p}ready (queue_id, priority, id, attempts, token)
            VALUES (v_queue, v_priority, v_id, 0, 0);
    END IF;
    IF v_own = 1 THEN
        COMMIT;
    ELSE
        RELEASE SAVEPOINT sqlmq_send;
    END IF;
    SELECT v_id AS id,
        LOWER(INSERT(INSERT(INSERT(INSERT(HEX(v_id), 21, 0, '-'), 17, 0, '-'), 13, 0, '-'), 9, 0, '-')) AS uuid,
        v_dup = 1 AS duplicate;
END
