-- Process managers (bus consumers that turn one aggregate's events into commands on others).

-- The last version of each source stream a manager has handled, written in the same transaction as
-- the commands the event led to: a redelivered event finds itself here and changes nothing.
CREATE TABLE api.handled_streams (
  manager text NOT NULL,
  stream_id text NOT NULL,
  version integer NOT NULL,
  PRIMARY KEY (manager, stream_id)
);

-- What each order's fulfillment orders hold and have shipped, by fulfillment order id, so that the
-- order's status can be decided from all of them. `version` makes concurrent updates of one
-- order's row optimistic: the loser decides again.
CREATE TABLE api.order_progress (
  order_id bigint PRIMARY KEY,
  org_id bigint NOT NULL,
  fulfillment jsonb NOT NULL,
  version integer NOT NULL
);
