-- A ledger as schema version 2 shipped it (version 1 and the result pieces of protocol v6), with a
-- little data. Frozen: never edit; a later schema version adds its own ledger_vN.sql, and
-- test_ledger migrates each to the current one.
CREATE TABLE work_units (
    id TEXT PRIMARY KEY,
    run TEXT NOT NULL,
    base_version INTEGER NOT NULL,
    config TEXT NOT NULL,
    device TEXT NOT NULL,
    inner_steps INTEGER NOT NULL,
    batch_size INTEGER NOT NULL,
    seq_len INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    steps INTEGER NOT NULL,
    compute_seconds REAL NOT NULL,
    loss_first REAL,
    loss_last REAL,
    state TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    trained_at_ms INTEGER
) STRICT;
CREATE INDEX work_units_created ON work_units(created_at_ms);
CREATE INDEX work_units_trained ON work_units(trained_at_ms);
CREATE INDEX work_units_state ON work_units(state);
CREATE TABLE work_unit_transitions (
    id INTEGER PRIMARY KEY,
    work_unit_id TEXT NOT NULL REFERENCES work_units(id) ON DELETE CASCADE,
    state TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    detail TEXT NOT NULL
) STRICT;
CREATE INDEX work_unit_transitions_unit ON work_unit_transitions(work_unit_id, id);
CREATE TABLE receipts (
    work_unit_id TEXT PRIMARY KEY REFERENCES work_units(id) ON DELETE CASCADE,
    round_applied INTEGER NOT NULL,
    weight REAL NOT NULL,
    credit REAL NOT NULL,
    received_at_ms INTEGER NOT NULL,
    signature BLOB NOT NULL,
    body BLOB NOT NULL
) STRICT;
CREATE INDEX receipts_received ON receipts(received_at_ms);
CREATE TABLE device_samples (
    id INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    device TEXT NOT NULL,
    tokens_per_second REAL NOT NULL,
    utilisation REAL,
    temperature_c REAL,
    memory_used_bytes INTEGER,
    memory_total_bytes INTEGER
) STRICT;
CREATE INDEX device_samples_at ON device_samples(at_ms);
CREATE TABLE transfers (
    id INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    direction TEXT NOT NULL CHECK (direction IN ('up', 'down')),
    purpose TEXT NOT NULL,
    bytes INTEGER NOT NULL CHECK (bytes >= 0),
    duration_ms INTEGER NOT NULL,
    ok INTEGER NOT NULL,
    work_unit_id TEXT NOT NULL,
    detail TEXT NOT NULL
) STRICT;
CREATE INDEX transfers_at ON transfers(at_ms);
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    level INTEGER NOT NULL,
    message TEXT NOT NULL
) STRICT;
CREATE INDEX events_at ON events(at_ms);
INSERT INTO work_units VALUES ('wu-a', 'run-1', 0, 'tiny', 'cuda:0', 50, 8, 64, 25600, 50, 120.5, 5.5, 3.25, 'accepted', 1000, 3000, 2000);
INSERT INTO work_units VALUES ('wu-b', 'run-1', 1, 'tiny', 'cpu', 50, 8, 64, 25600, 50, 600.0, 5.4, 3.5, 'uploaded', 4000, 6000, 5000);
INSERT INTO work_unit_transitions (work_unit_id, state, at_ms, detail) VALUES
  ('wu-a', 'assigned', 1000, ''), ('wu-a', 'trained', 2000, ''), ('wu-a', 'accepted', 3000, ''),
  ('wu-b', 'assigned', 4000, ''), ('wu-b', 'trained', 5000, ''), ('wu-b', 'uploaded', 6000, '');
INSERT INTO receipts VALUES ('wu-a', 1, 25600.0, 1.5, 3000, x'0102', x'7b7d');
INSERT INTO device_samples (at_ms, device, tokens_per_second, utilisation, temperature_c, memory_used_bytes, memory_total_bytes) VALUES (1500, 'cuda:0', 213.0, 0.97, 71.0, 1000000, 8000000);
INSERT INTO transfers (at_ms, direction, purpose, bytes, duration_ms, ok, work_unit_id, detail) VALUES
  (900, 'down', 'weights', 1000, 10, 1, 'wu-a', ''), (2500, 'up', 'result', 500, 20, 1, 'wu-a', '');
INSERT INTO events (at_ms, level, message) VALUES (1000, 1, 'Started work unit wu-a');
CREATE TABLE result_pieces (
    work_unit_id TEXT NOT NULL REFERENCES work_units(id) ON DELETE CASCADE,
    shard INTEGER NOT NULL CHECK (shard >= 0),
    state TEXT NOT NULL CHECK (state IN ('accepted', 'refused')),
    at_ms INTEGER NOT NULL,
    detail TEXT NOT NULL,
    signature BLOB NOT NULL,
    receipt_json BLOB NOT NULL,
    PRIMARY KEY (work_unit_id, shard)
) STRICT;
INSERT INTO result_pieces VALUES ('wu-b', 1, 'refused', 6500, 'norm_mismatch', x'', x'');
PRAGMA user_version = 2;
