import type { LookupAddress } from 'node:dns';
import {
  AddressGuard,
  BlockedTargetError,
  guardedLookup,
  nonPublicReason,
  type HostResolver,
} from './address-guard.js';

describe('nonPublicReason', () => {
  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '93.184.216.34',
    '11.0.0.1',
    '100.63.255.255',
    '100.128.0.0',
    '172.15.255.255',
    '172.32.0.0',
    '192.169.0.1',
    '223.255.255.255',
    '2606:4700:4700::1111',
    '2001:4860:4860::8888',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::1',
  ])('finds %s public', (address) => {
    expect(nonPublicReason(address)).toBeUndefined();
  });

  it.each([
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['10.0.0.1', 'private'],
    ['10.255.255.255', 'private'],
    ['100.64.0.1', 'shared address space'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['169.254.169.254', 'link-local'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.0.0.8', 'reserved'],
    ['192.0.2.1', 'documentation'],
    ['192.88.99.1', 'reserved'],
    ['192.168.1.1', 'private'],
    ['198.18.0.1', 'benchmarking'],
    ['198.51.100.7', 'documentation'],
    ['203.0.113.9', 'documentation'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'reserved'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['::127.0.0.1', 'reserved'],
    ['::ffff:127.0.0.1', 'loopback (127.0.0.1)'],
    ['::ffff:7f00:1', 'loopback (127.0.0.1)'],
    ['::FFFF:10.0.0.1', 'private (10.0.0.1)'],
    ['::ffff:169.254.169.254', 'link-local (169.254.169.254)'],
    ['64:ff9b::7f00:1', 'loopback (127.0.0.1)'],
    ['64:ff9b::192.168.0.1', 'private (192.168.0.1)'],
    ['64:ff9b:1::1', 'reserved'],
    ['2002:7f00:1::1', 'loopback (127.0.0.1)'],
    ['2002:c0a8:101::1', 'private (192.168.1.1)'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456:789a::1', 'unique-local'],
    ['fe80::1', 'link-local'],
    ['FE80::1%eth0', 'link-local'],
    ['febf:ffff::1', 'link-local'],
    ['fec0::1', 'site-local'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation'],
    ['100::1', 'reserved'],
    ['2001::1', 'reserved'],
    ['example.com', 'not an IP address'],
  ])('refuses %s as %s', (address, reason) => {
    expect(nonPublicReason(address)).toBe(reason);
  });
});

describe('AddressGuard', () => {
  it('refuses non-public addresses unless the network is allowed', () => {
    const guard = new AddressGuard({
      allowPrivateTargets: false,
      allowedNetworks: ['10.20.0.0/16', 'fd00:1::/32'],
    });
    expect(guard.refusal('10.20.3.4')).toBeUndefined();
    expect(guard.refusal('fd00:1:2::3')).toBeUndefined();
    expect(guard.refusal('10.21.0.1')).toBe('private');
    expect(guard.refusal('127.0.0.1')).toBe('loopback');
    expect(guard.refusal('8.8.8.8')).toBeUndefined();
  });

  it('refuses nothing when private targets are allowed', () => {
    const guard = new AddressGuard({ allowPrivateTargets: true, allowedNetworks: [] });
    expect(guard.refusal('127.0.0.1')).toBeUndefined();
    expect(guard.refusal('fe80::1')).toBeUndefined();
  });

  it('refuses a configured network that is not a CIDR block', () => {
    expect(() => new AddressGuard({ allowPrivateTargets: false, allowedNetworks: ['10.0.0.0'] })).toThrow(
      /CIDR/,
    );
    expect(() => new AddressGuard({ allowPrivateTargets: false, allowedNetworks: ['10.0.0.0/33'] })).toThrow(
      /CIDR/,
    );
  });
});

describe('guardedLookup', () => {
  const guard = new AddressGuard({ allowPrivateTargets: false, allowedNetworks: [] });
  const resolving =
    (answers: Record<string, readonly { address: string; family: 4 | 6 }[]>): HostResolver =>
    async (hostname) => {
      const answer = answers[hostname];
      if (!answer) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
      return answer;
    };
  const lookup = (
    resolve: HostResolver,
    hostname: string,
    options: { all?: boolean; family?: number },
  ): Promise<{ error: NodeJS.ErrnoException | null; address: string | LookupAddress[]; family?: number }> =>
    new Promise((done) => {
      guardedLookup(resolve, guard)(hostname, options, (error, address, family) =>
        done({ error, address, ...(family === undefined ? {} : { family }) }),
      );
    });

  it('hands the connection the address it checked', async () => {
    const resolve = resolving({ 'hooks.example': [{ address: '93.184.216.34', family: 4 }] });
    expect(await lookup(resolve, 'hooks.example', {})).toEqual({
      error: null,
      address: '93.184.216.34',
      family: 4,
    });
    expect(await lookup(resolve, 'hooks.example', { all: true })).toEqual({
      error: null,
      address: [{ address: '93.184.216.34', family: 4 }],
    });
  });

  it('refuses a host with any non-public address among its answers', async () => {
    const resolve = resolving({
      'mixed.example': [
        { address: '93.184.216.34', family: 4 },
        { address: '::1', family: 6 },
      ],
    });
    const { error } = await lookup(resolve, 'mixed.example', { all: true });
    expect(error).toBeInstanceOf(BlockedTargetError);
    expect(error?.message).toBe('mixed.example resolves to ::1: loopback');
  });

  it('passes DNS failures on, and keeps to the family asked for', async () => {
    const resolve = resolving({
      'dual.example': [
        { address: '93.184.216.34', family: 4 },
        { address: '2606:2800:220:1::1', family: 6 },
      ],
    });
    expect((await lookup(resolve, 'missing.example', {})).error?.code).toBe('ENOTFOUND');
    expect(await lookup(resolve, 'dual.example', { family: 6 })).toEqual({
      error: null,
      address: '2606:2800:220:1::1',
      family: 6,
    });
  });
});
