import type { FieldMap } from './fields.js';

/**
 * `value` (a record, or any part of one: `previous_attributes`, a list element) with its keys in the
 * order of `fields`, as API responses show them: the registry's order, at every depth, references as
 * `{id, ...display}`. Keys the registry does not declare are left out, fields that are absent stay
 * absent, and list elements that are no objects stay as they are. A record read back from jsonb (the
 * event store) comes with its keys in jsonb's order (shortest first), which no response has.
 */
export function inRegistryOrder(
  fields: FieldMap,
  value: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const ordered: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(fields)) {
    if (!Object.hasOwn(value, name) || field.kind === 'joined') continue;
    const nested = value[name];
    if (field.kind === 'list' && Array.isArray(nested)) {
      ordered[name] = nested.map((element: unknown) =>
        isObject(element) ? inRegistryOrder(field.fields, element) : element,
      );
    } else if (field.kind === 'object' && isObject(nested)) {
      ordered[name] = inRegistryOrder(field.fields, nested);
    } else if (field.kind === 'reference' && isObject(nested)) {
      ordered[name] = Object.fromEntries(
        ['id', ...field.display].flatMap((key) => (Object.hasOwn(nested, key) ? [[key, nested[key]]] : [])),
      );
    } else {
      ordered[name] = nested;
    }
  }
  return ordered;
}

function isObject(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
