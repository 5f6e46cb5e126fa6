import { DomainError } from '@ofp/contracts';
import { orders } from './registry.js';
import { transitionError } from './state-machine.js';

const machine = orders.stateMachine!;

describe('transitionError', () => {
  it.each([
    ['pending', 'open'],
    ['open', 'cancelled'],
    ['open', 'on_hold'],
    ['pending', 'on_hold'],
    ['on_hold', 'cancelled'],
    ['open', 'open'],
  ])('lets a client move from %s to %s', (from, to) => {
    expect(transitionError(machine, from, to)).toBeUndefined();
  });

  it('lets a held record go back to the status it had before the hold, and only to that one', () => {
    expect(transitionError(machine, 'on_hold', 'open', 'open')).toBeUndefined();
    expect(transitionError(machine, 'on_hold', 'pending', 'pending')).toBeUndefined();
    expect(transitionError(machine, 'on_hold', 'pending', 'open')).toEqual(
      new DomainError('Conflict', { status: ['cannot move from on_hold to pending'] }),
    );
  });

  it('refuses an illegal move with a conflict naming both states', () => {
    expect(transitionError(machine, 'cancelled', 'open')).toEqual(
      new DomainError('Conflict', { status: ['cannot move from cancelled to open'] }),
    );
  });

  it('refuses a derived status with a 422 on the column', () => {
    const error = transitionError(machine, 'open', 'fulfilled');
    expect(error?.kind).toBe('Unprocessable');
    expect(error?.errors).toEqual({ status: ['cannot be set to fulfilled: the system sets it'] });
  });
});
