#!/usr/bin/env node
// A webhook subscriber to try the platform with (README "Try it"): it checks each delivery's
// Standard Webhooks signature with the `standardwebhooks` library, as any subscriber should, and
// prints the event. Either give it the secret the platform answered when you created the webhook:
//
//   WEBHOOK_SECRET=whsec_... node examples/webhook-receiver.mjs
//
// or a token (write scope), and it subscribes itself through the typed client (@ofp/client) to the
// event types named (all by default), and removes its subscription when stopped (Ctrl-C):
//
//   TOKEN=... node examples/webhook-receiver.mjs person.created person.updated
//
// PORT (default 4000) is where it listens; API_URL (default http://localhost:8080) the platform;
// RECEIVER_URL (default http://localhost:PORT/) the URL it subscribes. A GET answers 200 once it
// takes deliveries (503 before), for scripts that start it and wait. Plain JavaScript, so that it
// runs without a build of its own (the client is built with the platform: npm start, npm run build).
import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { createPlatformClient } from '@ofp/client';

const port = Number(process.env.PORT ?? 4000);
const token = process.env.TOKEN;
if (!process.env.WEBHOOK_SECRET && !token) {
  console.error(
    'webhook-receiver: set WEBHOOK_SECRET to the secret the platform answered when the webhook was created (whsec_...), or TOKEN to a token with the write scope to let it subscribe itself',
  );
  process.exit(1);
}
/** Set once the secret is known: at once, or when the subscription is made. */
let webhook = process.env.WEBHOOK_SECRET ? new Webhook(process.env.WEBHOOK_SECRET) : undefined;

const server = createServer((request, response) => {
  if (request.method === 'GET') {
    // Readiness, for a script that starts the receiver and waits for it: deliveries are POSTs.
    response.writeHead(webhook ? 200 : 503).end();
    return;
  }
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    if (!webhook) {
      // Not subscribed yet: a 503 is retried.
      response.writeHead(503).end();
      return;
    }
    const body = Buffer.concat(chunks).toString('utf8');
    let event;
    try {
      // Checks webhook-signature against webhook-id, webhook-timestamp (at most 5 minutes old) and the
      // body exactly as it came; during a secret rotation either of the two signatures will do.
      event = webhook.verify(body, request.headers);
    } catch (error) {
      console.error(`webhook-receiver: refused a delivery: ${error.message}`);
      response.writeHead(400).end();
      return;
    }
    const record = event.data && typeof event.data === 'object' ? ` ${event.data.id ?? ''}` : '';
    console.log(
      `${event.type}${record} sequence ${event.sequence ?? '-'} (signature verified, webhook-id ${request.headers['webhook-id']})`,
    );
    console.log(`  ${JSON.stringify(event.data)}`);
    if (event.previous_attributes && Object.keys(event.previous_attributes).length > 0) {
      console.log(`  was: ${JSON.stringify(event.previous_attributes)}`);
    }
    // Any 2xx acknowledges the delivery; anything else, or no answer within 15 s, is retried.
    response.writeHead(204).end();
  });
});

const api = token
  ? createPlatformClient({ baseUrl: process.env.API_URL ?? 'http://localhost:8080', token })
  : undefined;
/** The subscription this receiver made, removed when it stops. */
let subscription;

server.listen(port, async () => {
  console.log(`webhook-receiver: listening on http://localhost:${port}/, printing each verified event`);
  if (!api) return;
  const events = process.argv.length > 2 ? process.argv.slice(2) : ['*'];
  const { data, error, response } = await api.POST('/v2/webhooks', {
    body: {
      url: process.env.RECEIVER_URL ?? `http://localhost:${port}/`,
      events,
      description: 'webhook-receiver example',
    },
  });
  if (!data) {
    console.error(
      `webhook-receiver: the platform refused the subscription (${response.status}): ${JSON.stringify(error?.errors ?? error)}`,
    );
    server.close(() => process.exit(1));
    return;
  }
  subscription = data.results.id;
  webhook = new Webhook(data.results.secret);
  console.log(`webhook-receiver: subscribed as webhook ${subscription} to ${events.join(', ')}`);
});

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, async () => {
    if (api && subscription !== undefined) {
      const { response } = await api.DELETE('/v2/webhooks/{id}', { params: { path: { id: subscription } } });
      console.log(`webhook-receiver: removed webhook ${subscription} (${response.status})`);
    }
    server.close(() => process.exit(0));
    // The platform keeps its connections open for the next delivery.
    server.closeAllConnections();
  });
}
