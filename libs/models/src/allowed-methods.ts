import type { ModelDefinition } from './fields.js';

/** The HTTP methods a model's endpoints answer (API.md §5, §6), derived from its write access. */
export function allowedMethods(model: ModelDefinition, path: 'collection' | 'record'): readonly string[] {
  switch (model.writes) {
    case 'read-only':
      return ['GET'];
    case 'append-only':
      return ['GET', 'POST'];
    case 'all':
      if (path === 'collection') return ['GET', 'POST'];
      return model.deletable ? ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] : ['GET', 'POST', 'PUT', 'PATCH'];
    default: {
      const unhandled: never = model.writes;
      throw new Error(`unknown write access ${String(unhandled)}`);
    }
  }
}
