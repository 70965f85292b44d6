// The coordinator's SQLite schema, as forward migrations (index i brings version i to i + 1).
#pragma once

#include <array>
#include <string_view>

namespace tandem::coord {

inline constexpr std::array<std::string_view, 8> kMigrations = {
    // 1: clients, the run, rounds, work units, accepted results and their receipts.
    R"sql(
CREATE TABLE clients (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  public_key BLOB NOT NULL,
  hardware TEXT NOT NULL,
  token_sha256 BLOB NOT NULL UNIQUE,
  created_unix INTEGER NOT NULL,
  last_seen_unix INTEGER NOT NULL
);
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  config_json TEXT NOT NULL,
  version INTEGER NOT NULL,            -- current global weights version = the open round
  data_cursor INTEGER NOT NULL,        -- next train token to hand out (bytes: a byte)
  train_bytes INTEGER NOT NULL,        -- train tokens (bytes of a byte-level run)
  train_sha256 TEXT NOT NULL,
  created_unix INTEGER NOT NULL
);
CREATE TABLE rounds (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  round INTEGER NOT NULL,
  opened_unix INTEGER NOT NULL,
  deadline_unix INTEGER NOT NULL,
  closed_unix INTEGER,
  contributors INTEGER NOT NULL DEFAULT 0,
  tokens INTEGER NOT NULL DEFAULT 0,
  weight_sum REAL NOT NULL DEFAULT 0,
  assigned_bytes INTEGER NOT NULL DEFAULT 0,  -- train bytes spanned by this round's work units
  val_loss REAL,
  PRIMARY KEY (run_id, round)
);
CREATE TABLE work_units (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  client_id INTEGER NOT NULL REFERENCES clients(id),
  base_version INTEGER NOT NULL,
  shard INTEGER NOT NULL,
  data_offset INTEGER NOT NULL,
  data_length INTEGER NOT NULL,
  inner_steps INTEGER NOT NULL,
  batch INTEGER NOT NULL,
  seq_len INTEGER NOT NULL,
  seed INTEGER NOT NULL,
  created_unix INTEGER NOT NULL,
  deadline_unix INTEGER NOT NULL,
  heartbeat_unix INTEGER NOT NULL,
  last_step INTEGER NOT NULL DEFAULT 0,
  last_loss REAL,
  tokens_per_second REAL NOT NULL DEFAULT 0,
  state TEXT NOT NULL CHECK (state IN ('assigned', 'accepted', 'abandoned')),
  abandon_reason TEXT,
  reassigned INTEGER NOT NULL DEFAULT 0,  -- its data range was handed to another work unit
  manifest_json TEXT NOT NULL DEFAULT ''
);
CREATE INDEX work_units_state ON work_units(run_id, state, base_version);
CREATE INDEX work_units_client ON work_units(client_id, state);
CREATE TABLE results (
  work_unit_id INTEGER PRIMARY KEY REFERENCES work_units(id),
  seq INTEGER NOT NULL UNIQUE,         -- acceptance order: the order of the round sum
  round INTEGER NOT NULL,
  weight REAL NOT NULL,
  tokens INTEGER NOT NULL,
  steps INTEGER NOT NULL,
  loss_last REAL NOT NULL,
  norm REAL NOT NULL,
  payload_sha256 BLOB NOT NULL,
  result_sha256 BLOB NOT NULL,
  signature BLOB NOT NULL,
  received_unix INTEGER NOT NULL
);
CREATE INDEX results_round ON results(round, seq);
CREATE TABLE receipts (
  work_unit_id INTEGER PRIMARY KEY REFERENCES results(work_unit_id),
  json TEXT NOT NULL
);
)sql",
    // 2: the worker's request id (POST /v1/work "request_id") that a unit was assigned for, so
    // a repeated request gets the same unit back instead of a new one.
    R"sql(
ALTER TABLE work_units ADD COLUMN request_id TEXT;
CREATE INDEX work_units_request ON work_units(client_id, request_id);
)sql",
    // 3: token corpora (coordinator/run_data.hpp). A token run's train and validation slices of
    // token files; byte-level runs have none (data/shard-0.bin, data/validation.bin). Work
    // units' data_offset/data_length count tokens over the train shards laid end to end, and
    // runs.train_sha256 of a token run is the fingerprint of its train rows.
    R"sql(
CREATE TABLE data_shards (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  split TEXT NOT NULL CHECK (split IN ('train', 'val')),
  number INTEGER NOT NULL,       -- train: the shard number in manifests and data URLs
  path TEXT NOT NULL,            -- relative: inside the state directory
  token_bytes INTEGER NOT NULL,
  header_bytes INTEGER NOT NULL,
  file_bytes INTEGER NOT NULL,
  first_token INTEGER NOT NULL,  -- the slice: tokens [first_token, first_token + tokens)
  tokens INTEGER NOT NULL,
  file_sha256 TEXT NOT NULL,
  PRIMARY KEY (run_id, split, number)
);
)sql",
    // 4: what the model writes after each version (samples.hpp).
    R"sql(
CREATE TABLE samples (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  version INTEGER NOT NULL,
  prompt_index INTEGER NOT NULL,
  prompt TEXT NOT NULL,
  text TEXT NOT NULL,
  seconds REAL NOT NULL,
  created_unix INTEGER NOT NULL,
  PRIMARY KEY (run_id, version, prompt_index)
);
)sql",
    // 5: donors' public names and teams, and the leaderboard's totals (leaderboard.hpp), kept
    // up to date in the transaction that accepts a result. *_key: the name folded to lower case
    // (net::publicNameKey); display names are unique by it, teams grouped by it.
    R"sql(
ALTER TABLE clients ADD COLUMN display_name TEXT;
ALTER TABLE clients ADD COLUMN display_key TEXT;
ALTER TABLE clients ADD COLUMN team TEXT;
ALTER TABLE clients ADD COLUMN team_key TEXT;
CREATE UNIQUE INDEX clients_display_key ON clients(display_key) WHERE display_key IS NOT NULL;
CREATE INDEX clients_team_key ON clients(team_key) WHERE team_key IS NOT NULL;
CREATE TABLE donor_totals (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  client_id INTEGER NOT NULL REFERENCES clients(id),
  tokens INTEGER NOT NULL DEFAULT 0,
  units INTEGER NOT NULL DEFAULT 0,
  credit REAL NOT NULL DEFAULT 0,      -- the sum of the receipts' weights
  PRIMARY KEY (run_id, client_id)
);
CREATE INDEX donor_totals_rank ON donor_totals(run_id, credit);
CREATE TABLE team_totals (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  team_key TEXT NOT NULL,
  team TEXT NOT NULL,                  -- the spelling of the team's first result
  tokens INTEGER NOT NULL DEFAULT 0,
  units INTEGER NOT NULL DEFAULT 0,
  credit REAL NOT NULL DEFAULT 0,      -- earned by donors while they were in the team
  PRIMARY KEY (run_id, team_key)
);
CREATE INDEX team_totals_rank ON team_totals(run_id, credit);
)sql",
    // 6: replication spot-checks (replication.hpp). A unit chosen for a check waits for a twin
    // (twin_wanted), a second unit of the same base version, data range, seed and H for another
    // client; each points at the other (twin_id). A twin's result waits in held_results (its
    // payload in held/<unit>.f16) until the other one arrives; each decided pair is a row of
    // replica_checks, counted on both clients, and a client with --replicate-strikes
    // disagreements, more than its agreements, is blocked.
    R"sql(
ALTER TABLE work_units ADD COLUMN twin_wanted INTEGER NOT NULL DEFAULT 0;
ALTER TABLE work_units ADD COLUMN twin_id INTEGER;
CREATE INDEX work_units_twin_wanted ON work_units(run_id, twin_wanted) WHERE twin_wanted = 1;
CREATE TABLE held_results (
  work_unit_id INTEGER PRIMARY KEY REFERENCES work_units(id),
  tokens INTEGER NOT NULL,
  steps INTEGER NOT NULL,
  loss_first REAL NOT NULL,
  loss_last REAL NOT NULL,
  norm REAL NOT NULL,
  weight_factor REAL NOT NULL,         -- the gate's, when it was checked on arrival
  payload_sha256 BLOB NOT NULL,
  result_sha256 BLOB NOT NULL,
  signature BLOB NOT NULL,
  received_unix INTEGER NOT NULL
);
CREATE TABLE replica_checks (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  first_unit INTEGER NOT NULL REFERENCES work_units(id),   -- the result that waited
  second_unit INTEGER NOT NULL REFERENCES work_units(id),
  first_client INTEGER NOT NULL REFERENCES clients(id),
  second_client INTEGER NOT NULL REFERENCES clients(id),
  distance REAL NOT NULL,              -- ||a - b|| / max(||a||, ||b||)
  agreed INTEGER NOT NULL,
  decided_unix INTEGER NOT NULL
);
ALTER TABLE clients ADD COLUMN replica_agreements INTEGER NOT NULL DEFAULT 0;
ALTER TABLE clients ADD COLUMN replica_disagreements INTEGER NOT NULL DEFAULT 0;
ALTER TABLE clients ADD COLUMN blocked_unix INTEGER;
)sql",
    // 7: front ends (front_end.cpp) name the files of a version without reading them: round v's
    // row holds the SHA-256 and size of version v's weights and of the weight delta v - 1 -> v,
    // written by the aggregating process with the version (and at its start).
    R"sql(
ALTER TABLE rounds ADD COLUMN weights_sha256 TEXT;
ALTER TABLE rounds ADD COLUMN weights_bytes INTEGER;
ALTER TABLE rounds ADD COLUMN delta_sha256 TEXT;
ALTER TABLE rounds ADD COLUMN delta_bytes INTEGER;
)sql",
    // 8: runs aggregated by K shards (issue 16; docs/protocol.md, "Sharded runs"). A result of
    // such a run arrives as K pieces, each committed by its shard on its own: result_pieces has a
    // row per committed piece (the first piece of a unit also writes its results row, with the
    // whole result's figures, and credits it once). rounds.closing_unix: the clock holder marked
    // the round closing; each shard then steps its range and records its part of the next
    // version in round_parts; the version is committed once all K parts are there.
    // shard_processes: where each shard's process is reached (manifests, parts).
    R"sql(
ALTER TABLE rounds ADD COLUMN closing_unix INTEGER;
CREATE TABLE result_pieces (
  work_unit_id INTEGER NOT NULL REFERENCES work_units(id),
  shard INTEGER NOT NULL,
  seq INTEGER NOT NULL,                -- acceptance order at the shard: the order of its sum
  round INTEGER NOT NULL,              -- the round of the shard's sum it went into
  weight REAL NOT NULL,
  sum_squares REAL NOT NULL,
  payload_sha256 BLOB NOT NULL,        -- of the piece's payload
  receipt_json TEXT NOT NULL,
  received_unix INTEGER NOT NULL,
  PRIMARY KEY (work_unit_id, shard)
);
CREATE INDEX result_pieces_round ON result_pieces(shard, round, seq);
CREATE TABLE round_parts (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  version INTEGER NOT NULL,            -- the version this part is of (the closed round + 1)
  shard INTEGER NOT NULL,
  weights_sha256 TEXT NOT NULL,        -- of the part file (part_file.hpp), a blob of the shard
  weights_bytes INTEGER NOT NULL,
  pieces INTEGER NOT NULL,
  weight_sum REAL NOT NULL,
  created_unix INTEGER NOT NULL,
  PRIMARY KEY (run_id, version, shard)
);
CREATE TABLE shard_processes (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  shard INTEGER NOT NULL,
  url TEXT NOT NULL,                   -- https://host:port of the shard's process
  started_unix INTEGER NOT NULL,
  PRIMARY KEY (run_id, shard)
);
)sql",
};

}  // namespace tandem::coord
