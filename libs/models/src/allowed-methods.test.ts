import { allowedMethods } from './allowed-methods.js';
import { inventory, inventoryAdjustments, invoices, people, shipments } from './registry.js';

describe('allowedMethods', () => {
  it.each([
    [people, 'collection', ['GET', 'POST']],
    [people, 'record', ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']],
    [invoices, 'record', ['GET', 'POST', 'PUT', 'PATCH']],
    [shipments, 'record', ['GET', 'POST', 'PUT', 'PATCH']],
    [inventory, 'collection', ['GET']],
    [inventory, 'record', ['GET']],
    [inventoryAdjustments, 'collection', ['GET', 'POST']],
    [inventoryAdjustments, 'record', ['GET', 'POST']],
  ] as const)('%s %s answers %j', (model, path, methods) => {
    expect(allowedMethods(model, path)).toEqual(methods);
  });
});
