import { Ajv2020 } from 'ajv/dist/2020.js';
import { z } from 'zod';
import { DomainError } from '@ofp/contracts';
import { webhookBody, webhookBodySchema } from './webhook-body.js';

function errorsOf(run: () => unknown): Record<string, string[]> | undefined {
  try {
    run();
    return undefined;
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    expect(error.kind).toBe('Unprocessable');
    return error.errors;
  }
}

describe('webhook bodies', () => {
  it('takes event types as strings, fills defaults and ignores secret, id and unknown fields', () => {
    expect(
      webhookBody(
        {
          url: 'https://x',
          events: ['order.created', 'person.updated', 'order.created'],
          secret: 's',
          id: 9,
          x: 1,
        },
        'create',
      ),
    ).toEqual({ url: 'https://x', events: ['order.created', 'person.updated'], enabled: true });
  });

  it('accepts "*" and the webhooks’ own events', () => {
    expect(webhookBody({ url: 'https://x', events: ['*', 'webhook.disabled'] }, 'create').events).toEqual([
      '*',
      'webhook.disabled',
    ]);
  });

  it('names every problem by column', () => {
    expect(errorsOf(() => webhookBody({}, 'create'))).toEqual({
      url: ['is required'],
      events: ['is required'],
    });
    expect(
      errorsOf(() =>
        webhookBody(
          { url: 7, events: ['order.created', 'invoice', 'people.created', 'person.frobbed', 3] },
          'create',
        ),
      ),
    ).toEqual({
      url: ['must be a string'],
      'events[1]': [
        'must be "*" or an event type of GET /v2/webhook_event_types: did you mean "invoice.paid"?',
      ],
      'events[2]': [
        'must be "*" or an event type of GET /v2/webhook_event_types: did you mean "person.created"?',
      ],
      'events[3]': [
        'must be "*" or an event type of GET /v2/webhook_event_types: did you mean "person.created"?',
      ],
      'events[4]': ['must be "*" or an event type of GET /v2/webhook_event_types such as "order.created"'],
    });
    expect(errorsOf(() => webhookBody({ url: 'https://x', events: 'order.created' }, 'create'))).toEqual({
      events: ['must be a non-empty array of event types (such as "order.created") or ["*"]'],
    });
    expect(
      errorsOf(() => webhookBody({ url: 'https://x', events: new Array(101).fill('*') }, 'create')),
    ).toEqual({ events: ['must have at most 100 elements'] });
    expect(errorsOf(() => webhookBody([1], 'create'))).toEqual({ base: ['must be a JSON object'] });
  });

  it('takes updates field by field', () => {
    expect(webhookBody({ enabled: false }, 'update')).toEqual({ enabled: false });
    expect(webhookBody({ events: ['*'] }, 'update')).toEqual({ events: ['*'] });
    expect(errorsOf(() => webhookBody({ enabled: null }, 'update'))).toEqual({ enabled: ["can't be null"] });
  });

  it('publishes events as the list of types the validator takes (what schemathesis checks)', () => {
    const valid = new Ajv2020({ strict: false }).compile(
      z.toJSONSchema(webhookBodySchema('create'), { io: 'input', unrepresentable: 'any' }),
    );
    for (const events of [
      ['*'],
      ['order.created', 'webhook.test'],
      ['*', 'order.created'],
      [],
      ['order.creat'],
      ['people.created'],
      [''],
      [1],
      new Array(101).fill('*'),
    ]) {
      const body = { url: 'https://erp.example.com/hooks', events };
      expect([events, valid(body)]).toEqual([
        events,
        errorsOf(() => webhookBody(body, 'create')) === undefined,
      ]);
    }
  });
});
