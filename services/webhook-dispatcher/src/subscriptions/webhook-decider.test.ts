import { DomainError, type RecordJson } from '@ofp/contracts';
import { decide, toApiRecord, toStoredRecord } from './webhook-decider.js';

const AT = '2026-11-21T07:30:00.000Z';
const LATER = '2026-11-21T08:00:00.000Z';

function created(): RecordJson {
  const event = decide(
    { kind: 'create', id: 7, fields: { url: 'https://hooks.example/x', events: ['order.created'] }, at: AT },
    undefined,
  );
  return event!.data.record;
}

describe('the webhook decider', () => {
  it('creates a record in registry order, with defaults and without any secret', () => {
    const event = decide(
      { kind: 'create', id: 7, fields: { url: 'https://hooks.example/x', events: ['*'] }, at: AT },
      undefined,
    );
    expect(event?.type).toBe('webhook.created');
    expect(Object.keys(event!.data.record)).toEqual([
      'id',
      'url',
      'events',
      'description',
      'enabled',
      'rate_limit',
      'external_id',
      'created_at',
      'updated_at',
      'version',
    ]);
    expect(event!.data).toEqual({
      record: {
        id: 7,
        url: 'https://hooks.example/x',
        events: ['*'],
        description: null,
        enabled: true,
        rate_limit: null,
        external_id: null,
        created_at: AT,
        updated_at: AT,
        version: 1,
      },
      previous: {},
      deleted: false,
    });
  });

  it('refuses to create over an existing record', () => {
    expect(() => decide({ kind: 'create', id: 7, fields: { url: 'https://x' }, at: AT }, created())).toThrow(
      DomainError,
    );
  });

  it('updates only what changed, with the old values as previous attributes', () => {
    const event = decide(
      {
        kind: 'update',
        fields: { url: 'https://hooks.example/x', enabled: false, description: 'd' },
        at: LATER,
      },
      created(),
    );
    expect(event?.type).toBe('webhook.updated');
    expect(event!.data.previous).toEqual({ enabled: true, description: null });
    expect(event!.data.record).toMatchObject({
      enabled: false,
      description: 'd',
      updated_at: LATER,
      version: 2,
    });
  });

  it('decides nothing for an update that changes nothing', () => {
    expect(
      decide({ kind: 'update', fields: { events: ['order.created'] }, at: LATER }, created()),
    ).toBeUndefined();
  });

  it('answers a missing webhook with NotFound and a stale If-Match with PreconditionFailed', () => {
    const kindOf = (run: () => unknown): string => {
      try {
        run();
        return 'none';
      } catch (error) {
        return error instanceof DomainError ? error.kind : 'other';
      }
    };
    expect(kindOf(() => decide({ kind: 'delete', at: LATER }, undefined))).toBe('NotFound');
    expect(kindOf(() => decide({ kind: 'delete', at: LATER, ifMatch: [2] }, created()))).toBe(
      'PreconditionFailed',
    );
    expect(kindOf(() => decide({ kind: 'delete', at: LATER, ifMatch: [1] }, created()))).toBe('none');
  });

  it('deletes with a new version', () => {
    const event = decide({ kind: 'delete', at: LATER }, created());
    expect(event).toMatchObject({ type: 'webhook.deleted', data: { deleted: true, record: { version: 2 } } });
  });

  it('disables an enabled endpoint once, as webhook.disabled', () => {
    const event = decide({ kind: 'disable', reason: 'gone', at: LATER }, created());
    expect(event).toMatchObject({
      type: 'webhook.disabled',
      data: { record: { enabled: false, version: 2 }, previous: { enabled: true }, deleted: false },
    });
    expect(decide({ kind: 'disable', reason: 'failing', at: LATER }, event!.data.record)).toBeUndefined();
    expect(decide({ kind: 'disable', reason: 'failing', at: LATER }, undefined)).toBeUndefined();
  });

  it('converts between the API form and the registry form of events', () => {
    const record = created();
    expect(toStoredRecord(record).events).toEqual([{ type: 'order.created' }]);
    expect(toApiRecord(toStoredRecord(record))).toEqual(record);
  });
});
