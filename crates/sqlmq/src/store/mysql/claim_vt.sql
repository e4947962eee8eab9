CREATE PROCEDURE IF NOT EXISTS {p}claim_vt(
    IN p_queue INT,
    IN p_n INT,
    IN p_lease_us BIGINT,
    IN p_owner VARBINARY(255)
)
MODIFIES SQL DATA
SQL SECURITY INVOKER
COMMENT 'sqlmq internal: the library''s claim, in a transaction of its own; not a contract'
BEGIN
    -- Only ever called outside a transaction, on a connection of sqlmq's own pool: its START
    -- TRANSACTION would commit a caller's. An error leaves the transaction open, and the
    -- caller rolls it back.
    --
    -- `claim_timed` (schema version 15) for ready's primary key of version 16, `(queue_id,
    -- priority, vt, id)`: within a priority, a fair queue's messages in the order of their
    -- virtual start times (`store/body/fair.rs`), every other queue's (vt 0) in arrival order.
    --
    -- The claim read is the script's (`claim.rs`): the head of the queue's range of ready's
    -- primary key, SKIP LOCKED, as a cursor (its rows are read and locked when it opens). The
    -- heads it found go into one JSON array, [[priority, id, attempts, token, ordering key,
    -- vt], …] with the bytes in hexadecimal, which the moves and the answer read as a table: three
    -- statements for any number of messages. Every other read is a locking one: a plain read
    -- may use a read view older than what the cursor's locking read found.
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_id BINARY(16);
    DECLARE v_priority SMALLINT;
    DECLARE v_attempts INT;
    DECLARE v_token BIGINT;
    DECLARE v_key VARBINARY(128);
    DECLARE v_vt BIGINT;
    DECLARE v_heads LONGTEXT CHARACTER SET ascii DEFAULT '';
    DECLARE v_now DATETIME(6);
    DECLARE heads CURSOR FOR
        SELECT r.id, r.priority, r.attempts, r.token, m.ordering_key, r.vt
        FROM {p}ready r FORCE INDEX (PRIMARY) STRAIGHT_JOIN {p}messages m ON m.id = r.id
        WHERE r.queue_id = p_queue
          AND NOT EXISTS (SELECT 1 FROM {p}queues q WHERE q.id = p_queue AND q.paused <> 0)
        ORDER BY r.priority, r.vt, r.id LIMIT p_n FOR UPDATE SKIP LOCKED;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
    START TRANSACTION;
    SET v_now = UTC_TIMESTAMP(6);
    OPEN heads;
    heads_read: LOOP
        FETCH heads INTO v_id, v_priority, v_attempts, v_token, v_key, v_vt;
        IF v_done THEN
            LEAVE heads_read;
        END IF;
        SET v_heads = CONCAT(v_heads, IF(v_heads = '', '[', ','), '[', v_priority, ',"',
            HEX(v_id), '",', v_attempts, ',', v_token, ',',
            IFNULL(CONCAT('"', HEX(v_key), '"'), 'null'), ',', v_vt, ']');
    END LOOP;
    CLOSE heads;
    IF v_heads <> '' THEN
        SET v_heads = CONCAT(v_heads, ']');
        INSERT INTO {p}leases
            (id, queue_id, priority, token, attempts, ordering_key, lease_until, claimed_at, owner)
            SELECT UNHEX(h.id), p_queue, h.priority, h.token + 1, GREATEST(h.attempts + 1, 1),
                   UNHEX(h.okey), DATE_ADD(v_now, INTERVAL p_lease_us MICROSECOND), v_now, p_owner
            FROM JSON_TABLE(v_heads, '$[*]' COLUMNS (
                priority SMALLINT PATH '$[0]', id CHAR(32) PATH '$[1]', attempts INT PATH '$[2]',
                token BIGINT PATH '$[3]', okey VARCHAR(256) PATH '$[4]')) h;
        DELETE r FROM JSON_TABLE(v_heads, '$[*]' COLUMNS (
                priority SMALLINT PATH '$[0]', id CHAR(32) PATH '$[1]', vt BIGINT PATH '$[5]')) h
            STRAIGHT_JOIN {p}ready r FORCE INDEX (PRIMARY)
            ON r.queue_id = p_queue AND r.priority = h.priority AND r.vt = h.vt
                AND r.id = UNHEX(h.id);
        -- The answer: the claim read's columns (the values before the claim), in claim order,
        -- before the COMMIT: the client takes them only when the call's final answer says it
        -- committed.
        SELECT UNHEX(h.id), h.priority, h.attempts, h.token, m.ordering_key, m.idempotency_key,
               m.headers, m.body,
               TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', m.created_at),
               TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', v_now),
               TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', m.deadline_at),
               m.run_timeout_us
            FROM JSON_TABLE(v_heads, '$[*]' COLUMNS (
                n FOR ORDINALITY, priority SMALLINT PATH '$[0]', id CHAR(32) PATH '$[1]',
                attempts INT PATH '$[2]', token BIGINT PATH '$[3]')) h
            STRAIGHT_JOIN {p}messages m FORCE INDEX (PRIMARY) ON m.id = UNHEX(h.id)
            ORDER BY h.n FOR UPDATE;
    END IF;
    COMMIT;
END
