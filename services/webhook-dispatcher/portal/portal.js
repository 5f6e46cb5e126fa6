// The subscriber portal's script (docs/api-notes.md "Subscriber portal"): it reads the session's token
// from the link's fragment and calls the platform's own /v2/webhooks* and /v2/webhook_deliveries*
// operations with it. Text from the API is only ever set as text, never parsed as HTML.

const TOKEN_KEY = 'ofp-portal-token';
const fragment = new URLSearchParams(location.hash.slice(1));
if (fragment.has('token')) {
  sessionStorage.setItem(TOKEN_KEY, fragment.get('token'));
  // Out of the address bar and the history, so that the token is not shared with a copied address.
  history.replaceState(null, '', location.pathname);
}
const token = sessionStorage.getItem(TOKEN_KEY);

const $ = (selector) => document.querySelector(selector);
const status = $('#status');
let endpoints = [];
let shown; // the delivery open in the detail panel

function say(message, error = false) {
  status.textContent = message;
  status.className = error ? 'error' : '';
}

/** An API call with the session's token: the envelope's `results`, or an Error with its messages. */
async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const envelope = await response.json().catch(() => ({}));
  if (response.status === 401)
    throw new Error('This portal session has expired or is not valid: ask for a new link.');
  if (!response.ok) {
    const messages = Object.entries(envelope.errors ?? {}).map(
      ([field, list]) => `${field}: ${list.join(', ')}`,
    );
    throw new Error(messages.join('; ') || `HTTP ${response.status}`);
  }
  return envelope.results;
}

const search = (model, q) => api('GET', `/v2/${model}?q=${encodeURIComponent(JSON.stringify(q))}`);

/** An element with text and attributes, and children. */
function el(tag, text, attributes = {}, ...children) {
  const element = document.createElement(tag);
  if (text !== undefined && text !== null) element.textContent = String(text);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  element.append(...children);
  return element;
}

function button(label, action) {
  const element = el('button', label, { type: 'button' });
  element.addEventListener('click', () => run(action));
  return element;
}

/** Runs a click's work, saying what failed. */
async function run(action) {
  try {
    await action();
  } catch (error) {
    say(error.message, true);
  }
}

const when = (timestamp) => (timestamp ? new Date(timestamp).toLocaleString() : '');

async function loadEndpoints() {
  endpoints = await search('webhooks', { order: [{ column: 'id', direction: 'asc' }], limit: 500 });
  const rows = endpoints.map((webhook) =>
    el(
      'tr',
      undefined,
      { 'data-webhook': webhook.id },
      el('td', webhook.id),
      el('td', webhook.url),
      el('td', webhook.events.join(', ')),
      el('td', webhook.enabled ? 'enabled' : 'disabled'),
      el(
        'td',
        undefined,
        {},
        button(webhook.enabled ? 'Disable' : 'Enable', async () => {
          await api('PATCH', `/v2/webhooks/${webhook.id}`, { enabled: !webhook.enabled });
          say(`Endpoint ${webhook.id} ${webhook.enabled ? 'disabled' : 'enabled'}.`);
          await loadEndpoints();
        }),
        button('Send test event', async () => {
          const delivery = await api('POST', `/v2/webhooks/${webhook.id}/test`, {});
          say(`Test event queued: delivery ${delivery.id}.`);
          await loadDeliveries();
          await showDelivery(delivery.id);
        }),
        button('Rotate secret', async () => {
          const rotated = await api('POST', `/v2/webhooks/${webhook.id}/rotate_secret`, {});
          const secret = $('#secret');
          secret.textContent = `New secret of endpoint ${webhook.id} (shown once; the old one also signs for 24 hours): ${rotated.secret}`;
          secret.hidden = false;
          say(`Secret of endpoint ${webhook.id} rotated.`);
        }),
      ),
    ),
  );
  $('#endpoints tbody').replaceChildren(...rows);
  const select = $('#recover select');
  select.replaceChildren(
    ...endpoints.map((webhook) => el('option', `${webhook.id} ${webhook.url}`, { value: webhook.id })),
  );
}

async function loadDeliveries() {
  const deliveries = await search('webhook_deliveries', {
    order: [{ column: 'id', direction: 'desc' }],
    limit: 100,
  });
  const rows = deliveries.map((delivery) => {
    const row = el(
      'tr',
      undefined,
      { 'data-delivery': delivery.id, 'aria-selected': String(delivery.id === shown) },
      el('td', delivery.id),
      el('td', delivery.webhook_id),
      el('td', delivery.event_type),
      el('td', delivery.status, { class: delivery.status }),
      el('td', delivery.attempts),
      el('td', when(delivery.created_at)),
    );
    row.addEventListener('click', () => run(() => showDelivery(delivery.id)));
    return row;
  });
  $('#deliveries tbody').replaceChildren(...rows);
}

/** The request every attempt sends (API.md §8): its Standard Webhooks headers and the payload. */
function requestOf(delivery) {
  let body = delivery.payload;
  try {
    body = JSON.stringify(JSON.parse(delivery.payload), null, 2);
  } catch {
    // Shown as stored.
  }
  const url = endpoints.find((webhook) => webhook.id === delivery.webhook_id)?.url ?? '';
  return `POST ${url}\ncontent-type: application/json\nwebhook-id: ${delivery.event_id}\n\n${body}`;
}

async function showDelivery(id) {
  const delivery = await api('GET', `/v2/webhook_deliveries/${id}`);
  shown = delivery.id;
  $('#delivery-heading').textContent =
    `Delivery ${delivery.id}: ${delivery.event_type}, ${delivery.status}, ${delivery.attempts} attempt${delivery.attempts === 1 ? '' : 's'}`;
  $('#request').textContent = requestOf(delivery);
  $('#attempts tbody').replaceChildren(
    ...delivery.attempt_log.map((attempt) =>
      el(
        'tr',
        undefined,
        {},
        el('td', when(attempt.started_at)),
        el('td', `${attempt.duration_ms} ms`),
        el('td', attempt.status_code ?? '—'),
        el('td', attempt.error ?? ''),
        el('td', undefined, {}, el('pre', attempt.response_excerpt ?? '')),
      ),
    ),
  );
  $('#delivery').hidden = false;
  for (const row of document.querySelectorAll('#deliveries tbody tr'))
    row.setAttribute('aria-selected', String(Number(row.dataset.delivery) === shown));
  return delivery;
}

/** Follows a delivery until its attempts pass `attempts` (a retry's answer comes once it is queued, not sent). */
async function follow(id, attempts) {
  for (let tries = 0; tries < 60; tries++) {
    const delivery = await showDelivery(id);
    if (delivery.attempts > attempts && delivery.status !== 'pending') break;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  await loadDeliveries();
}

$('#retry').addEventListener('click', () =>
  run(async () => {
    const before = await api('GET', `/v2/webhook_deliveries/${shown}`);
    await api('POST', `/v2/webhook_deliveries/${shown}/retry`, {});
    say(`Delivery ${shown} queued again.`);
    await follow(shown, before.attempts);
  }),
);

$('#recover').addEventListener('submit', (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  run(async () => {
    const since = new Date(form.get('since')).toISOString();
    const result = await api('POST', `/v2/webhooks/${form.get('webhook')}/recover`, { since });
    say(
      `Recovered ${result.recovered} failed deliver${result.recovered === 1 ? 'y' : 'ies'} of endpoint ${result.webhook_id} since ${when(result.since)}.`,
    );
    await loadDeliveries();
  });
});

async function loadEventTypes() {
  const types = await api('GET', '/v2/webhook_event_types');
  $('#event-types').replaceChildren(
    ...types.flatMap(({ type, description }) => [el('dt', type), el('dd', description)]),
  );
}

if (!token) {
  say('Open this page with the link of a portal session (POST /v2/webhooks/portal_sessions).', true);
} else {
  run(async () => {
    await loadEndpoints();
    await Promise.all([loadDeliveries(), loadEventTypes()]);
    // Recover's default: a day ago, in the browser's time zone as the input shows it.
    const dayAgo = new Date(Date.now() - 86_400_000);
    $('#recover input').value = new Date(dayAgo.getTime() - dayAgo.getTimezoneOffset() * 60_000)
      .toISOString()
      .slice(0, 19);
    $('main').hidden = false;
  });
}
