#!/usr/bin/env node
// A webhook subscriber to try the platform with (README "Try it"): it checks each delivery's
// Standard Webhooks signature with the `standardwebhooks` library, as any subscriber should, and
// prints the event. Run it with the secret the platform answered when the webhook was created:
//
//   WEBHOOK_SECRET=whsec_... node examples/webhook-receiver.mjs      (PORT, default 4000)
//
// Plain JavaScript, so that it runs without a build.
import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';

const secret = process.env.WEBHOOK_SECRET;
if (!secret) {
  console.error(
    'webhook-receiver: set WEBHOOK_SECRET to the secret the platform answered when the webhook was created (whsec_...)',
  );
  process.exit(1);
}
const port = Number(process.env.PORT ?? 4000);
const webhook = new Webhook(secret);

const server = createServer((request, response) => {
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
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

server.listen(port, () => {
  console.log(`webhook-receiver: listening on http://localhost:${port}/, printing each verified event`);
});
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => server.close(() => process.exit(0)));
