-- The trace schema of version 3 (podium before 2026-12-01: FTS5 over the texts as written, not
-- folded), for the migration test of version 4.
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
    id TEXT PRIMARY KEY,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    mode TEXT NOT NULL,
    pool TEXT NOT NULL,
    workers TEXT NOT NULL DEFAULT '[]',
    conductor TEXT NOT NULL,
    status TEXT NOT NULL,
    question TEXT NOT NULL,
    answer TEXT,
    error TEXT,
    workflows TEXT NOT NULL DEFAULT '[]',
    fallback_reason TEXT,
    fallback_detail TEXT,
    totals TEXT,
    total_cost_usd REAL,
    wall_time_s REAL,
    tags TEXT NOT NULL DEFAULT '[]',
    subject TEXT
);
CREATE INDEX IF NOT EXISTS requests_started ON requests (started_at);
CREATE INDEX IF NOT EXISTS requests_subject ON requests (subject) WHERE subject IS NOT NULL;
CREATE TABLE IF NOT EXISTS plan_attempts (
    request_id TEXT NOT NULL REFERENCES requests (id) ON DELETE CASCADE,
    round INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    messages TEXT NOT NULL,
    raw_output TEXT NOT NULL,
    workflow TEXT,
    error_kind TEXT,
    error TEXT,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL,
    latency_s REAL NOT NULL,
    constrained INTEGER NOT NULL,
    started_at TEXT,
    finished_at TEXT,
    disclosures TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (request_id, round, attempt)
);
CREATE TABLE IF NOT EXISTS steps (
    request_id TEXT NOT NULL REFERENCES requests (id) ON DELETE CASCADE,
    phase TEXT NOT NULL,
    round INTEGER NOT NULL,
    step_index INTEGER NOT NULL,
    worker_index INTEGER NOT NULL,
    worker TEXT NOT NULL,
    subtask TEXT NOT NULL,
    access TEXT NOT NULL,
    visible TEXT NOT NULL,
    visible_previous TEXT NOT NULL,
    messages TEXT NOT NULL,
    output TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL,
    latency_s REAL NOT NULL,
    finish_reason TEXT NOT NULL,
    error TEXT,
    error_type TEXT,
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    disclosures TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (request_id, phase, round, step_index)
);
CREATE TABLE IF NOT EXISTS search_text (
    id INTEGER PRIMARY KEY,
    request_id TEXT NOT NULL REFERENCES requests (id) ON DELETE CASCADE,
    field TEXT NOT NULL,
    location TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS search_text_request ON search_text (request_id);
CREATE VIRTUAL TABLE IF NOT EXISTS search_index USING fts5 (text, content='search_text', content_rowid='id');
CREATE TRIGGER IF NOT EXISTS search_text_insert AFTER INSERT ON search_text BEGIN
    INSERT INTO search_index (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER IF NOT EXISTS search_text_delete AFTER DELETE ON search_text BEGIN
    INSERT INTO search_index (search_index, rowid, text) VALUES ('delete', old.id, old.text);
END;
INSERT INTO meta (key, value) VALUES ('schema_version', '3');
