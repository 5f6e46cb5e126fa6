-- Every change of the enabled endpoints and their subscriptions is announced on channel
-- `webhook_subscribers` when it commits (issue 25 item 5): the event intake of each dispatcher process
-- keeps each organization's subscribers in memory instead of looking them up for every batch
-- (SubscriberCache), and forgets them when told. Per statement, with no payload: Postgres folds a
-- transaction's equal notifications into one, and a change is rare next to the events it routes.
CREATE FUNCTION webhooks.announce_subscribers_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('webhook_subscribers', '');
  RETURN NULL;
END
$$;
CREATE TRIGGER subscribers_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON webhooks.webhooks
  FOR EACH STATEMENT EXECUTE FUNCTION webhooks.announce_subscribers_changed();
CREATE TRIGGER subscribers_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON webhooks.webhooks__events
  FOR EACH STATEMENT EXECUTE FUNCTION webhooks.announce_subscribers_changed();
