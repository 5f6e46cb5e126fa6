import { jest } from '@jest/globals';
import { freePort } from './ports.js';

describe('freePort', () => {
  afterEach(() => jest.restoreAllMocks());

  it('never hands out a port twice, though nobody listens on it yet', async () => {
    // The same draw each time: the first port is still free when it comes up again.
    jest.spyOn(Math, 'random').mockReturnValue(0.5);
    const first = await freePort();
    const second = await freePort();
    expect(second).not.toBe(first);
  });
});
