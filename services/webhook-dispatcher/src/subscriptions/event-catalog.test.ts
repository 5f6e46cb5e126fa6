import type { z } from 'zod';
import { MODELS, recordSchema } from '@ofp/models';
import { DELIVERY_FAILED_EVENT_TYPE, TEST_EVENT_TYPE, webhookDeliveries, webhooks } from '../models.js';
import { EVENT_TYPES, dataSchema, eventCatalog, isEventType, webhookSchema } from './event-catalog.js';
import { WEBHOOK_EVENT_TYPES } from './webhook-decider.js';

describe('the webhook event catalog', () => {
  it("has the events the dispatcher itself sends: a webhook's changes, the test event, a delivery given up", () => {
    expect(
      [...WEBHOOK_EVENT_TYPES, TEST_EVENT_TYPE, DELIVERY_FAILED_EVENT_TYPE].filter(
        (type) => !isEventType(type),
      ),
    ).toEqual([]);
  });

  it('describes a webhook change with the webhook, a delivery given up with the delivery, a record change with the record', () => {
    expect(dataSchema(webhooks, 'webhook.disabled')).toBe(webhookSchema());
    expect(dataSchema(webhooks, DELIVERY_FAILED_EVENT_TYPE)).toBe(recordSchema(webhookDeliveries));
    expect(dataSchema(MODELS.people, 'person.created')).toBe(recordSchema(MODELS.people));
  });

  it('gives every event type, and only those, a payload schema: its type, and the record it is about as data', () => {
    const catalog = eventCatalog();
    expect(catalog.map(({ type }) => type)).toEqual(EVENT_TYPES.map(({ type }) => type));
    for (const { type, payload } of catalog) {
      const model = [...Object.values(MODELS), webhooks].find((candidate) =>
        candidate.eventTypes.some((eventType) => eventType.type === type),
      )!;
      const { shape } = payload as z.ZodObject<{ type: z.ZodLiteral<string>; data: z.ZodType }>;
      expect(shape.type.value).toBe(type);
      expect(shape.data).toBe(dataSchema(model, type));
    }
  });
});
