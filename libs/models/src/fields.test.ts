import { column, defineModel, joined, list, reference, type FieldMap } from './fields.js';
import { people, phoneNumberTypes } from './registry.js';

const declare = (fields: FieldMap, extra: object = {}) =>
  defineModel({ name: 'things', singular: 'thing', writeScope: 'write', fields, ...extra });

describe('defineModel', () => {
  it('adds the common fields around the declared ones, id first', () => {
    expect(Object.keys(people.fields)).toEqual([
      'id',
      'first_name',
      'last_name',
      'email',
      'company',
      'phone_numbers',
      'external_id',
      'created_at',
      'updated_at',
      'version',
    ]);
  });

  it('makes a column nullable unless it is required or has a default', () => {
    expect(column.string()).toMatchObject({ required: false, nullable: true });
    expect(column.string({ required: true })).toMatchObject({ nullable: false });
    expect(column.boolean({ default: true })).toMatchObject({ nullable: false });
  });

  it.each<[string, FieldMap | (() => unknown)]>([
    ['a common field', { version: column.integer() }],
    ['a name of a key column', { ordinal: column.integer() }],
    ['a name of a key column in a list', { lines: list({ record_id: column.integer() }) }],
    ['a name that is not an identifier', { 'First Name': column.string() }],
    ['a reference stored over a field', { owner: reference(() => people), owner_id: column.integer() }],
  ])('refuses %s', (_case, fields) => {
    expect(() => declare(fields as FieldMap)).toThrow();
  });

  it('refuses a joined relation that starts from no column of the model, or from inside a list', () => {
    const shipped = () => people;
    expect(() => declare({ things: joined(shipped, { column: 'nothing', targetColumn: 'id' }) })).toThrow(
      'things.things: joins by nothing, which is not a column of things',
    );
    expect(() =>
      declare({ lines: list({ people: joined(shipped, { column: 'id', targetColumn: 'id' }) }) }),
    ).toThrow('things.lines.people: joined relations belong to models');
  });

  it('refuses a state machine over a column that is not enumerated', () => {
    const stateMachine = { column: 'status', initial: 'new', transitions: {}, derived: [] };
    expect(() => declare({ status: column.string() }, { stateMachine })).toThrow(
      /enumerated string column status/,
    );
  });

  it('refuses a state machine naming a state the column does not allow', () => {
    const stateMachine = { column: 'status', initial: 'new', transitions: { new: ['done'] }, derived: [] };
    expect(() => declare({ status: column.string({ values: ['new'] }) }, { stateMachine })).toThrow(
      /state done/,
    );
  });

  it('declares references by thunk, so the target may come later', () => {
    const field = people.fields.phone_numbers;
    expect(field?.kind === 'list' && field.fields.phone_number_type).toMatchObject({ kind: 'reference' });
    expect(
      field?.kind === 'list' &&
        field.fields.phone_number_type?.kind === 'reference' &&
        field.fields.phone_number_type.target(),
    ).toBe(phoneNumberTypes);
  });
});
