import { describe, expect, it } from '@jest/globals';
import { AddressGuard, type HostResolver } from '../delivery/address-guard.js';
import { UrlPolicy } from './url-policy.js';

const publicOnly = new AddressGuard({ allowPrivateTargets: false, allowedNetworks: [] });

describe('UrlPolicy', () => {
  it('refuses a host that resolves to a private address', async () => {
    const resolve: HostResolver = async () => [{ address: '10.0.0.7', family: 4 }];
    expect(await new UrlPolicy(publicOnly, resolve).problem('https://erp.example.com/hooks')).toMatch(
      /resolves to 10\.0\.0\.7/,
    );
  });

  it('accepts a host that does not resolve, to be judged again at each delivery', async () => {
    const resolve: HostResolver = () =>
      Promise.reject(Object.assign(new Error('no such host'), { code: 'ENOTFOUND' }));
    expect(await new UrlPolicy(publicOnly, resolve).problem('https://erp.example.com/hooks')).toBeUndefined();
  });

  it('waits no longer than its bound for a resolver that does not answer (a dropped DNS query)', async () => {
    const resolve: HostResolver = () => new Promise(() => undefined);
    expect(
      await new UrlPolicy(publicOnly, resolve, 50).problem('https://erp.example.com/hooks'),
    ).toBeUndefined();
  });
});
