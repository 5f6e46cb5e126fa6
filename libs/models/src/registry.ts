import { column, defineModel, list, reference, type ModelDefinition } from './fields.js';

// The model registry (API.md §6). Each model is declared here once.

/** The phone number types every organization has from the start (API.md §6). */
export const PHONE_NUMBER_TYPE_SEEDS = ['Work', 'Home', 'Mobile', 'Fax'] as const;

export const phoneNumberTypes = defineModel({
  name: 'phone_number_types',
  singular: 'phone_number_type',
  writeScope: 'write',
  fields: {
    name: column.string({ required: true, unique: true, maxLength: 100 }),
  },
});

export const people = defineModel({
  name: 'people',
  singular: 'person',
  writeScope: 'write',
  fields: {
    first_name: column.string(),
    last_name: column.string({ required: true }),
    email: column.string({ pattern: { regex: /^[^@\s]+@[^@\s]+$/, message: 'must be an email address' } }),
    company: column.string(),
    phone_numbers: list({
      number: column.string({
        required: true,
        maxLength: 20,
        pattern: { regex: /^\d{3,20}$/, message: 'must be 3 to 20 digits' },
      }),
      phone_number_type: reference(() => phoneNumberTypes, { lookupKeys: ['id', 'name'], display: ['name'] }),
    }),
  },
});

const CURRENCY = { regex: /^[A-Z]{3}$/, message: 'must be an ISO 4217 currency code such as USD' };

export const items = defineModel({
  name: 'items',
  singular: 'item',
  writeScope: 'write',
  fields: {
    sku: column.string({ required: true, unique: true }),
    name: column.string(),
    // Long text is not indexed: a B-tree entry cannot exceed about 2.7 kB.
    description: column.string({ maxLength: 4000 }),
    barcode: column.string(),
    unit_of_measure: column.string({ maxLength: 50 }),
    weight: column.decimal({ scale: 3, min: 0 }),
    weight_unit: column.string({ values: ['g', 'kg', 'oz', 'lb'] }),
    price: column.decimal({ scale: 2, min: 0 }),
    currency: column.string({ maxLength: 3, pattern: CURRENCY }),
    active: column.boolean({ default: true }),
  },
});

/** Every model of the registry, by endpoint name. */
export const MODELS: Readonly<Record<string, ModelDefinition>> = {
  [phoneNumberTypes.name]: phoneNumberTypes,
  [people.name]: people,
  [items.name]: items,
};

/** The model served at `/v2/<name>`, or `undefined` for an unknown name. */
export function findModel(name: string): ModelDefinition | undefined {
  return Object.hasOwn(MODELS, name) ? MODELS[name] : undefined;
}
