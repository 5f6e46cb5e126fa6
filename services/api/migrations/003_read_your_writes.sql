-- Read-your-writes (API.md §5) waits for the process managers too: a statement that marks events
-- handled raises a NOTIFY, delivered when its transaction commits, so that a waiting write's
-- response learns at once that the follow-on changes are in the event store.
CREATE FUNCTION api.notify_handled() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('api_handled', '');
  RETURN NULL;
END
$$;

CREATE TRIGGER handled_streams_notify
  AFTER INSERT OR UPDATE ON api.handled_streams
  FOR EACH STATEMENT EXECUTE FUNCTION api.notify_handled();
