-- Read-your-writes past its wait (API.md §5): a write whose response went out before the read model
-- showed it (READ_YOUR_WRITES_TIMEOUT_MS) leaves what it wrote here, committed before its response.
-- Every read of its organization, in any api process, sees the row in its own statement, waits until
-- the read model shows what the row names (then deletes it) or answers 503 with Retry-After. No row
-- is written while the read model keeps up: the normal read pays one probe of this empty index.
CREATE TABLE api.unsettled_writes (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  org_id bigint NOT NULL,
  written jsonb NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX unsettled_writes_org ON api.unsettled_writes (org_id);
