import fc from 'fast-check';
import type { RecordJson } from '@ofp/contracts';
import { MODELS, type FieldMap, type ModelDefinition } from '@ofp/models';
import { rulesOf } from './rules-by-model.js';

/**
 * Every event type the record decider can announce is in the model's catalog (API.md §8), which the
 * webhook event catalog, `GET /v2/webhook_event_types` and the published descriptions are made of:
 * the decider refuses to decide any other (a 500), so one missing here would surface as a failed write.
 */
describe('the event types a record change is announced as', () => {
  const catalog = (model: ModelDefinition) => model.eventTypes.map(({ type }) => type);

  it.each(Object.values(MODELS).map((model) => [model.name, model] as const))(
    "%s: every type its rules decide, for any change of any of its records, is in the model's catalog",
    (_name, model) => {
      const rules = rulesOf(model);
      const record = recordArbitrary(model.fields);
      fc.assert(
        fc.property(fc.option(record, { nil: undefined }), record, (before, after) => {
          const type = rules.eventType(before, after);
          return type === undefined || catalog(model).includes(type);
        }),
        { numRuns: 500 },
      );
    },
  );

  it.each(Object.values(MODELS).map((model) => [model.name, model] as const))(
    '%s: the generic types of the changes it can go through are in its catalog',
    (_name, model) => {
      // A read-only model is still created and changed, by the process managers (inventory).
      const changes = model.writes === 'append-only' ? ['created'] : ['created', 'updated'];
      const expected = [...changes, ...(model.deletable ? ['deleted'] : [])];
      expect(catalog(model)).toEqual(
        expect.arrayContaining(expected.map((change) => `${model.singular}.${change}`)),
      );
    },
  );
});

/**
 * Records of a model's fields, from small pools of values so that changes between two of them often
 * touch only a field or two: every status of a state machine, a few tracking numbers and times.
 */
function recordArbitrary(fields: FieldMap): fc.Arbitrary<RecordJson> {
  const shape: Record<string, fc.Arbitrary<unknown>> = {
    id: fc.constant(1),
    version: fc.integer({ min: 1, max: 3 }),
  };
  for (const [name, field] of Object.entries(fields)) {
    switch (field.kind) {
      case 'column':
        shape[name] = columnValues(field.type, field.type === 'string' ? field.values : undefined);
        break;
      case 'list':
        shape[name] = fc.array(recordArbitrary(field.fields), { maxLength: 2 });
        break;
      case 'object':
        shape[name] = fc.option(recordArbitrary(field.fields), { nil: null });
        break;
      case 'reference':
        shape[name] = fc.option(fc.record({ id: fc.integer({ min: 1, max: 2 }) }), { nil: null });
        break;
      case 'joined':
        break;
      default: {
        const unhandled: never = field;
        throw new Error(`unknown field ${JSON.stringify(unhandled)}`);
      }
    }
  }
  return fc.record(shape) as fc.Arbitrary<RecordJson>;
}

function columnValues(type: string, values: readonly string[] | undefined): fc.Arbitrary<unknown> {
  if (values) return fc.constantFrom(...values);
  switch (type) {
    case 'integer':
      return fc.integer({ min: 0, max: 3 });
    case 'decimal':
      return fc.constantFrom('0.00', '10.00', '20.00');
    case 'boolean':
      return fc.boolean();
    case 'date':
      return fc.constantFrom('2026-12-01', '2026-12-02');
    case 'timestamp':
      return fc.constantFrom(null, '2026-11-21T07:30:00.000Z', '2026-11-22T07:30:00.000Z');
    default:
      return fc.constantFrom(null, 'a', 'b');
  }
}
