import type { z } from 'zod';
import { MODELS, recordSchema } from '@ofp/models';
import { webhooks } from '../models.js';
import { EVENT_TYPES, eventCatalog, isEventType, webhookSchema } from './event-catalog.js';
import { TEST_EVENT_TYPE } from './webhook-commands.js';
import { WEBHOOK_EVENT_TYPES } from './webhook-decider.js';

describe('the webhook event catalog', () => {
  it("has the events the dispatcher itself sends: a webhook's changes and the test event", () => {
    expect([...WEBHOOK_EVENT_TYPES, TEST_EVENT_TYPE].filter((type) => !isEventType(type))).toEqual([]);
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
      expect(shape.data).toBe(model === webhooks ? webhookSchema() : recordSchema(model));
    }
  });
});
