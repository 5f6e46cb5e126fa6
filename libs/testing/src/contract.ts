import { readFile } from 'node:fs/promises';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import type { Middleware } from 'openapi-fetch';
import { REPOSITORY_ROOT } from './standalone-process.js';

/**
 * The API description as the repository keeps it (`docs/openapi.json`, which a unit test holds equal
 * to what the code generates), to check what a running platform answers and sends against it with a
 * JSON Schema validator of its own (Ajv, JSON Schema 2020-12 as OpenAPI 3.1 uses it).
 */
export interface Contract {
  /** Every event type of the document's `webhooks` section. */
  readonly webhookTypes: readonly string[];
  /**
   * What is wrong with a response to an operation (`GET`, `/v2/people/{id}`): an undocumented status,
   * another media type, a body its schema refuses. None when it conforms.
   */
  responseProblems(response: {
    method: string;
    path: string;
    status: number;
    contentType: string | null;
    body: string;
  }): string[];
  /** What is wrong with a webhook delivery's body against the `webhooks` entry of its type. */
  deliveryProblems(body: string): string[];
  /** An openapi-fetch middleware that fails the request when its response is not what the document says. */
  readonly middleware: Middleware;
}

interface Document {
  readonly paths: Record<string, Record<string, { responses: Record<string, Described> }>>;
  readonly webhooks: Record<string, unknown>;
}

interface Described {
  readonly content?: Record<string, unknown>;
}

/** Reads `docs/openapi.json` and prepares its validators. */
export async function loadContract(): Promise<Contract> {
  const document = JSON.parse(await readFile(`${REPOSITORY_ROOT}docs/openapi.json`, 'utf8')) as Document;
  // The document is added whole so that its `#/components/schemas/...` references resolve; OpenAPI's
  // own keywords around the schemas are not JSON Schema, hence not strict.
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
  // ajv-formats is CommonJS: its plugin is the module itself.
  (ajvFormats as unknown as typeof ajvFormats.default)(ajv);
  ajv.addSchema(document, 'openapi.json');
  const validators = new Map<string, ValidateFunction>();
  const validate = (pointer: readonly string[], value: unknown): string[] => {
    const ref = `openapi.json#/${pointer.map((part) => part.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;
    let validator = validators.get(ref);
    if (!validator) {
      validator = ajv.compile({ $ref: ref });
      validators.set(ref, validator);
    }
    if (validator(value)) return [];
    return (validator.errors ?? []).map(
      (error) =>
        `${error.instancePath || '(body)'} ${error.message ?? 'is invalid'} ${JSON.stringify(error.params)}`,
    );
  };

  const responseProblems: Contract['responseProblems'] = ({ method, path, status, contentType, body }) => {
    const operation = document.paths[path]?.[method.toLowerCase()];
    if (!operation) return [`${method} ${path} is not in the document`];
    const described = operation.responses[String(status)];
    if (!described) return [`${status} is not a documented response of ${method} ${path}`];
    const media = Object.keys(described.content ?? {});
    if (media.length === 0 || method === 'HEAD') return [];
    const type = (contentType ?? '').split(';')[0]!.trim();
    const documented = media.find((name) => name.split(';')[0]!.trim() === type);
    if (documented === undefined)
      return [`the content type ${contentType} is not one of ${media.join(', ')}`];
    if (documented !== 'application/json') return [];
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      return ['the body is not JSON'];
    }
    return validate(
      ['paths', path, method.toLowerCase(), 'responses', String(status), 'content', documented, 'schema'],
      parsed,
    );
  };

  return {
    webhookTypes: Object.keys(document.webhooks),
    responseProblems,
    deliveryProblems(body) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(body);
      } catch {
        return ['the body is not JSON'];
      }
      const type = (parsed as { type?: unknown }).type;
      if (typeof type !== 'string' || !Object.hasOwn(document.webhooks, type))
        return [`the event type ${String(type)} is not in the document's webhooks`];
      return validate(
        ['webhooks', type, 'post', 'requestBody', 'content', 'application/json', 'schema'],
        parsed,
      );
    },
    middleware: {
      async onResponse({ request, response, schemaPath }) {
        const problems = responseProblems({
          method: request.method,
          path: schemaPath,
          status: response.status,
          contentType: response.headers.get('content-type'),
          body: await response.clone().text(),
        });
        if (problems.length > 0)
          throw new Error(
            `${request.method} ${schemaPath} answered ${response.status}, not as docs/openapi.json says:\n  ${problems.join('\n  ')}`,
          );
        return undefined;
      },
    },
  };
}
