import { readModelDdl } from './ddl.js';
import { items, people, phoneNumberTypes, shipments } from './registry.js';

const statements = (ddl: string) => ddl.split(';\n').filter(Boolean);

describe('readModelDdl', () => {
  const ddl = readModelDdl([phoneNumberTypes, people, items, shipments]);

  it('gives every string column byte-order collation', () => {
    const stringColumns = ddl.match(/"?\w+"? (text|character varying\(\d+\))( COLLATE "C")?[,\n;]/g) ?? [];
    expect(stringColumns.length).toBeGreaterThan(10);
    for (const column of stringColumns) expect(column).toMatch(/ COLLATE "C"/);
  });

  it('types columns after the registry, their bounds included', () => {
    expect(ddl).toContain('ALTER TABLE "read"."items" ADD COLUMN IF NOT EXISTS "price" numeric(19,4)');
    expect(ddl).toContain('ALTER TABLE "read"."items" ADD COLUMN IF NOT EXISTS "weight" numeric(16,4)');
    expect(ddl).toContain(
      'ALTER TABLE "read"."items" ADD COLUMN IF NOT EXISTS "description" character varying(10000) COLLATE "C"',
    );
    expect(ddl).toContain('ALTER TABLE "read"."items" ADD COLUMN IF NOT EXISTS "active" boolean');
    expect(ddl).toContain(
      'ALTER TABLE "read"."shipments" ADD COLUMN IF NOT EXISTS "shipped_at" timestamp with time zone',
    );
    expect(ddl).toContain(
      'ALTER TABLE "read"."shipments__packages__lines" ADD COLUMN IF NOT EXISTS "quantity" integer',
    );
    expect(ddl).toContain(
      'ALTER TABLE "read"."people__phone_numbers" ADD COLUMN IF NOT EXISTS "phone_number_type_id" bigint',
    );
  });

  it('alters the columns whose type in the catalog is not the declared one, in one statement per table', () => {
    const retype = statements(ddl).find((statement) => statement.includes('\'"read"."items"\'::regclass'));
    expect(retype).toContain("('price', 'numeric(19,4)', 'numeric(19,4)')");
    expect(retype).toContain("('sku', 'character varying(255)', 'character varying(255) COLLATE \"C\"')");
    expect(retype).toContain('EXECUTE \'ALTER TABLE "read"."items" \' || changes;');
  });

  it('keys lists inside lists by the record, the parent element and the element', () => {
    expect(ddl).toContain(`CREATE TABLE IF NOT EXISTS "read"."shipments__packages__lines" (
  org_id bigint NOT NULL,
  "record_id" bigint NOT NULL,
  "packages_ordinal" integer NOT NULL,
  "ordinal" integer NOT NULL,
  PRIMARY KEY ("record_id", "packages_ordinal", "ordinal"),
  FOREIGN KEY ("record_id", "packages_ordinal")
    REFERENCES "read"."shipments__packages" ("record_id", "ordinal")
    ON DELETE CASCADE
)`);
  });

  it('indexes both directions of every orderable column, but not long text', () => {
    expect(ddl).toContain('ON "read"."people" ("org_id", "last_name", "id")');
    expect(ddl).toContain('ON "read"."people" ("org_id", "last_name" DESC, "id")');
    expect(ddl).toContain('ON "read"."people__phone_numbers" ("org_id", "number", "record_id")');
    expect(ddl).not.toMatch(/CREATE INDEX [^\n]*"description"/);
  });

  it('names every index uniquely within 63 bytes', () => {
    const names = statements(ddl).flatMap(
      (statement) => /^CREATE INDEX IF NOT EXISTS "([^"]+)"/.exec(statement)?.[1] ?? [],
    );
    expect(names.length).toBeGreaterThan(40);
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) expect(name.length).toBeLessThanOrEqual(63);
  });

  it('puts the tables in the schema it is given', () => {
    const elsewhere = readModelDdl([people], { schema: 'read_v2' });
    expect(elsewhere).toContain('CREATE SCHEMA IF NOT EXISTS "read_v2"');
    expect(elsewhere).not.toContain('"read".');
  });

  it('refuses a schema name that is not a plain identifier', () => {
    expect(() => readModelDdl([people], { schema: 'read"; DROP SCHEMA public; --' })).toThrow(
      /not a safe SQL identifier/,
    );
  });
});
