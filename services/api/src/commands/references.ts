import { fieldError } from '@ofp/contracts';
import type { FieldMap, ModelDefinition, RecordBody, ReferenceDefinition } from '@ofp/models';
import type { RecordStore } from './record-store.js';
import type { UniqueValues } from './unique-values.js';

/**
 * Resolves the references of a validated body inside the organization: a reference object named by
 * one of its lookup keys (`{"name": "Work"}`) becomes `{id, ...display}` (`{"id": 3, "name": "Work"}`),
 * and an id column that references a model (`customer_id`) must name a live record. Another
 * organization's record is unknown (API.md §1). Errors are 422s on the column path.
 */
export class ReferenceResolver {
  constructor(
    private readonly records: RecordStore,
    private readonly unique: UniqueValues,
  ) {}

  async resolve(model: ModelDefinition, orgId: number, body: RecordBody): Promise<RecordBody> {
    return await this.resolveFields(model.fields, orgId, body, '');
  }

  private async resolveFields(
    fields: FieldMap,
    orgId: number,
    value: Record<string, unknown>,
    path: string,
  ): Promise<Record<string, unknown>> {
    const resolved: Record<string, unknown> = { ...value };
    for (const [name, field] of Object.entries(fields)) {
      const given = value[name];
      if (given === undefined || given === null) continue;
      const at = path === '' ? name : `${path}.${name}`;
      switch (field.kind) {
        case 'reference':
          resolved[name] = await this.resolveReference(field, orgId, given as Record<string, unknown>, at);
          break;
        case 'list':
          resolved[name] = await Promise.all(
            (given as Record<string, unknown>[]).map((element, index) =>
              this.resolveFields(field.fields, orgId, element, `${at}[${index}]`),
            ),
          );
          break;
        case 'object':
          resolved[name] = await this.resolveFields(
            field.fields,
            orgId,
            given as Record<string, unknown>,
            at,
          );
          break;
        case 'joined':
          break;
        case 'column':
          if (field.type === 'integer' && field.references)
            await this.requireRecord(field.references(), orgId, given as number, at);
          break;
        default: {
          const unhandled: never = field;
          throw new Error(`unhandled field ${JSON.stringify(unhandled)}`);
        }
      }
    }
    return resolved;
  }

  private async resolveReference(
    field: ReferenceDefinition,
    orgId: number,
    given: Record<string, unknown>,
    at: string,
  ): Promise<Record<string, unknown>> {
    const target = field.target();
    let id = typeof given.id === 'number' ? given.id : undefined;
    if (id === undefined) {
      const key = field.lookupKeys.find((k) => k !== 'id' && typeof given[k] === 'string');
      if (key !== undefined) id = await this.unique.lookup(orgId, target.name, key, given[key] as string);
    }
    if (id === undefined) throw fieldError('Unprocessable', at, `must name an existing ${target.singular}`);
    const record = await this.requireRecord(target, orgId, id, at);
    return Object.fromEntries<unknown>([
      ['id', id],
      ...field.display.map((column): [string, unknown] => [column, record[column]]),
    ]);
  }

  private async requireRecord(
    target: ModelDefinition,
    orgId: number,
    id: number,
    at: string,
  ): Promise<Record<string, unknown>> {
    const state = await this.records.load(target, id, orgId);
    if (state.status !== 'live')
      throw fieldError('Unprocessable', at, `${target.singular} ${id} does not exist`);
    return state.record;
  }
}
