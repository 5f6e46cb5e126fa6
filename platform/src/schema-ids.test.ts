import { z } from 'zod';
import { repositoryDescriptions } from './descriptions.js';

// Each schema id names one schema: zod's registry keeps the last schema given an id, and the
// published documents name a component by it, so two different schemas under one id would let the
// documents describe one of them under the other's name (the stored webhook, whose `events` are
// `{type}` objects, and its API form, with strings, were both `Webhook`).

describe('schema ids', () => {
  it('name one schema each across the published descriptions', () => {
    const added = new Map<string, Set<z.core.$ZodType>>();
    const registry = z.globalRegistry;
    const add = registry.add.bind(registry);
    registry.add = (schema, ...meta) => {
      const id = (meta[0] as { id?: string } | undefined)?.id;
      if (id !== undefined) added.set(id, (added.get(id) ?? new Set()).add(schema));
      return add(schema, ...meta);
    };
    try {
      repositoryDescriptions();
    } finally {
      registry.add = add;
    }
    expect(added.size).toBeGreaterThan(50);
    const described = (schema: z.core.$ZodType) =>
      JSON.stringify(z.toJSONSchema(schema, { io: 'output', unrepresentable: 'any', cycles: 'ref' }));
    const clashes = [...added]
      .filter(([, schemas]) => new Set([...schemas].map(described)).size > 1)
      .map(([id]) => id);
    expect(clashes).toEqual([]);
  });
});
