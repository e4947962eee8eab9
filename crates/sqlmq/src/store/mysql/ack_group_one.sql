CREATE PROCEDURE IF NOT EXISTS {p}ack_group_one(
    IN p_group INT,
    IN p_id BINARY(16),
    IN p_token BIGINT,
    IN p_state TINYINT,
    IN p_kept INT
)
MODIFIES SQL DATA
SQL SECURITY INVOKER
COMMENT 'sqlmq internal: the library''s ack of one cluster-group receipt in the caller''s transaction; not a contract'
BEGIN
    -- Runs in the caller's transaction (a worker's job transaction, or the acker's own):
    -- it neither starts nor ends one. Answers one row: 1 acked, 0 the receipt does not hold
    -- its lease (nothing written). The same reads and writes as the statements of
    -- `store/body/group_settle.rs` (lock the lease by primary key, delete it, append the
    -- event to the record's history), in one round trip.
    DECLARE v_found INT DEFAULT 0;
    DECLARE v_part INT;
    DECLARE v_offset BIGINT;
    DECLARE v_attempts INT;
    DECLARE v_owner VARBINARY(255);
    DECLARE v_claimed DATETIME(6);
    DECLARE v_now DATETIME(6);
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_found = 0;
    SET v_now = UTC_TIMESTAMP(6);
    -- Locking, so the latest version; the lease row's lock serialises this ack with the
    -- releases of expired leases and with another holder's ack.
    SELECT partition_no, msg_offset, attempts, owner, claimed_at, 1
        INTO v_part, v_offset, v_attempts, v_owner, v_claimed, v_found
        FROM {p}group_leases FORCE INDEX (PRIMARY)
        WHERE group_id = p_group AND id = p_id AND token = p_token AND lease_until > v_now
        FOR UPDATE;
    IF v_found = 1 THEN
        -- By primary key, forced: left to itself the optimizer may take the expiry index for
        -- a procedure's parameters, locking the group's other leases on the way (two acks
        -- then deadlock).
        DELETE l FROM {p}group_leases l FORCE INDEX (PRIMARY)
            WHERE l.group_id = p_group AND l.id = p_id;
        -- The event is `domain::DeliveryEvent` as JSON, one line; the events kept are the
        -- last p_kept (the trailing newline makes one more, empty, field). CHAR(10) rather
        -- than '\n': NO_BACKSLASH_ESCAPES may be on.
        INSERT INTO {p}group_history
            (group_id, partition_no, msg_offset, id, state, attempts, token, settled_at, events)
            VALUES (p_group, v_part, v_offset, p_id, p_state, v_attempts, p_token, v_now,
                CONCAT(JSON_OBJECT(
                    'attempt', GREATEST(v_attempts, 0),
                    'member', CONVERT(v_owner USING utf8mb4),
                    'delivered_at', DATE_FORMAT(v_claimed, '%Y-%m-%dT%H:%i:%s.%fZ'),
                    'at', DATE_FORMAT(v_now, '%Y-%m-%dT%H:%i:%s.%fZ'),
                    'outcome', 'acked'), CHAR(10)))
            ON DUPLICATE KEY UPDATE state = VALUES(state), attempts = VALUES(attempts),
                token = VALUES(token), settled_at = VALUES(settled_at),
                events = SUBSTRING_INDEX(CONCAT(events, VALUES(events)), CHAR(10), -(p_kept + 1));
    END IF;
    SELECT v_found;
END
