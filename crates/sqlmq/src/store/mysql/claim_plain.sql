CREATE PROCEDURE IF NOT EXISTS {p}claim_plain(
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
    -- caller rolls it back. The claim read is the script's (`claim.rs`): the head of the
    -- queue's range of ready's primary key, SKIP LOCKED; a cursor's rows are read and locked
    -- when it opens. Each claimed message is answered as a result set of one row with the
    -- columns of the script's claim read (the values before the claim), all before the COMMIT:
    -- the client takes them only when the call's final answer says it committed.
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_id BINARY(16);
    DECLARE v_priority SMALLINT;
    DECLARE v_attempts INT;
    DECLARE v_token BIGINT;
    DECLARE v_key VARBINARY(128);
    DECLARE v_now DATETIME(6);
    DECLARE heads CURSOR FOR
        SELECT r.id, r.priority, r.attempts, r.token, m.ordering_key
        FROM {p}ready r FORCE INDEX (PRIMARY) STRAIGHT_JOIN {p}messages m ON m.id = r.id
        WHERE r.queue_id = p_queue
          AND NOT EXISTS (SELECT 1 FROM {p}queues q WHERE q.id = p_queue AND q.paused <> 0)
        ORDER BY r.priority, r.id LIMIT p_n FOR UPDATE SKIP LOCKED;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
    START TRANSACTION;
    SET v_now = UTC_TIMESTAMP(6);
    OPEN heads;
    claimed: LOOP
        FETCH heads INTO v_id, v_priority, v_attempts, v_token, v_key;
        IF v_done THEN
            LEAVE claimed;
        END IF;
        DELETE FROM {p}ready WHERE queue_id = p_queue AND priority = v_priority AND id = v_id;
        INSERT INTO {p}leases
            (id, queue_id, priority, token, attempts, ordering_key, lease_until, claimed_at, owner)
            VALUES (v_id, p_queue, v_priority, v_token + 1, GREATEST(v_attempts + 1, 1), v_key,
                    DATE_ADD(v_now, INTERVAL p_lease_us MICROSECOND), v_now, p_owner);
        SELECT v_id, v_priority, v_attempts, v_token, m.ordering_key, m.idempotency_key,
               m.headers, m.body,
               TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', m.created_at),
               TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', v_now)
            FROM {p}messages m WHERE m.id = v_id;
    END LOOP;
    CLOSE heads;
    COMMIT;
END
