import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';

// The SSRF guard (API.md §8): a webhook may only reach public addresses, checked on the addresses a
// host name resolves to, and the connection is made to exactly the address that was checked, so a
// DNS answer that changes between the check and the connect (rebinding) cannot slip through.

/**
 * Addresses that are not public, by reason: the IANA IPv4 and IPv6 Special-Purpose Address Registries
 * (RFC 6890 and its updates), minus the blocks that are globally reachable.
 */
const NON_PUBLIC: readonly (readonly [reason: string, network: string, prefix: number])[] = [
  ['unspecified', '0.0.0.0', 8], // RFC 1122 "this network"
  ['private', '10.0.0.0', 8], // RFC 1918
  ['shared address space', '100.64.0.0', 10], // RFC 6598 (carrier-grade NAT)
  ['loopback', '127.0.0.0', 8], // RFC 1122
  ['link-local', '169.254.0.0', 16], // RFC 3927 (cloud metadata endpoints live here)
  ['private', '172.16.0.0', 12], // RFC 1918
  ['reserved', '192.0.0.0', 24], // RFC 6890 IETF protocol assignments
  ['documentation', '192.0.2.0', 24], // RFC 5737
  ['reserved', '192.88.99.0', 24], // RFC 7526 (deprecated 6to4 relay anycast)
  ['private', '192.168.0.0', 16], // RFC 1918
  ['benchmarking', '198.18.0.0', 15], // RFC 2544
  ['documentation', '198.51.100.0', 24], // RFC 5737
  ['documentation', '203.0.113.0', 24], // RFC 5737
  ['multicast', '224.0.0.0', 4], // RFC 5771
  ['reserved', '240.0.0.0', 4], // RFC 1112, with the limited broadcast address
  ['unspecified', '::', 128], // RFC 4291
  ['loopback', '::1', 128], // RFC 4291
  ['reserved', '::', 96], // RFC 4291 deprecated IPv4-compatible addresses
  ['reserved', '100::', 64], // RFC 6666 discard-only
  ['reserved', '64:ff9b:1::', 48], // RFC 8215 local-use NAT64
  ['reserved', '2001::', 23], // RFC 2928 IETF protocol assignments
  ['documentation', '2001:db8::', 32], // RFC 3849
  ['documentation', '3fff::', 20], // RFC 9637
  ['unique-local', 'fc00::', 7], // RFC 4193
  ['link-local', 'fe80::', 10], // RFC 4291
  ['site-local', 'fec0::', 10], // RFC 3879 (deprecated, still routed privately)
  ['multicast', 'ff00::', 8], // RFC 4291
];

const RANGES = NON_PUBLIC.map(([reason, network, prefix]) => {
  const list = new BlockList();
  list.addSubnet(network, prefix, isIP(network) === 6 ? 'ipv6' : 'ipv4');
  return { reason, list };
});

/**
 * Why `address` (an IPv4 or IPv6 literal) is not a public address, or undefined when it is. IPv6
 * addresses that carry an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4
 * `2002::/16`) reach that IPv4 address, so they are judged by it.
 */
export function nonPublicReason(address: string): string | undefined {
  const literal = withoutZone(address);
  const family = isIP(literal);
  if (family === 0) return 'not an IP address';
  if (family === 6) {
    const embedded = embeddedIpv4(literal);
    if (embedded !== undefined) {
      const reason = nonPublicReason(embedded);
      return reason === undefined ? undefined : `${reason} (${embedded})`;
    }
  }
  const type = family === 6 ? 'ipv6' : 'ipv4';
  return RANGES.find(({ list }) => list.check(literal, type))?.reason;
}

/** `fe80::1%eth0`: the zone only says which interface; the address is what is judged. */
function withoutZone(address: string): string {
  const zone = address.indexOf('%');
  return zone === -1 ? address : address.slice(0, zone);
}

/** The IPv4 address inside an IPv4-mapped, NAT64 or 6to4 IPv6 address. */
function embeddedIpv4(address: string): string | undefined {
  const words = ipv6Words(address);
  const dotted = (high: number, low: number): string =>
    [high >> 8, high & 0xff, low >> 8, low & 0xff].join('.');
  const [w0, w1, w2, w3, w4, w5, w6, w7] = words;
  if (w0 === 0 && w1 === 0 && w2 === 0 && w3 === 0 && w4 === 0 && w5 === 0xffff) return dotted(w6!, w7!);
  if (w0 === 0x64 && w1 === 0xff9b && w2 === 0 && w3 === 0 && w4 === 0 && w5 === 0) return dotted(w6!, w7!);
  if (w0 === 0x2002) return dotted(w1!, w2!);
  return undefined;
}

/** The eight 16-bit words of a valid IPv6 literal (`::` expanded, a trailing dotted quad converted). */
function ipv6Words(address: string): number[] {
  let text = address.toLowerCase();
  let tail: number[] = [];
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    tail = [(a << 8) | b, (c << 8) | d];
    text = text.slice(0, quad.index);
    // `::ffff:1.2.3.4` leaves `::ffff:`; `::1.2.3.4` leaves `::`.
    if (text.endsWith(':') && !text.endsWith('::')) text = text.slice(0, -1);
  }
  const [head = '', rest] = text.split('::');
  const words = (part: string): number[] => (part === '' ? [] : part.split(':').map((w) => parseInt(w, 16)));
  const before = words(head);
  const after = rest === undefined ? [] : words(rest);
  const gap = 8 - tail.length - before.length - after.length;
  return [...before, ...new Array<number>(rest === undefined ? 0 : gap).fill(0), ...after, ...tail];
}

/** Which targets a deployment allows (API.md §8 `WEBHOOK_ALLOW_PRIVATE_TARGETS`). */
export interface TargetPolicy {
  /** Any address, and plain `http` URLs: for local runs and tests. */
  readonly allowPrivateTargets: boolean;
  /** Non-public networks allowed all the same (CIDR, `10.20.0.0/16`): a deployment's own receivers. */
  readonly allowedNetworks: readonly string[];
}

/** Judges target addresses by a {@link TargetPolicy}. */
export class AddressGuard {
  private readonly allowed = new BlockList();

  constructor(readonly policy: TargetPolicy) {
    for (const network of policy.allowedNetworks) {
      const [address = '', prefix] = network.split('/');
      const family = isIP(address);
      const bits = Number(prefix);
      if (family === 0 || !Number.isInteger(bits) || bits < 0 || bits > (family === 6 ? 128 : 32))
        throw new Error(`allowed network ${network} is not a CIDR block such as 10.20.0.0/16`);
      this.allowed.addSubnet(address, bits, family === 6 ? 'ipv6' : 'ipv4');
    }
  }

  /** Why `address` may not be a webhook target, or undefined when it may. */
  refusal(address: string): string | undefined {
    if (this.policy.allowPrivateTargets) return undefined;
    const reason = nonPublicReason(address);
    if (reason === undefined) return undefined;
    const literal = withoutZone(address);
    return this.allowed.check(literal, isIP(literal) === 6 ? 'ipv6' : 'ipv4') ? undefined : reason;
  }
}

/** An address a host name resolves to. */
export interface ResolvedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

/** Resolves a host name to all its addresses (injected, so that tests can stage DNS answers). */
export type HostResolver = (hostname: string) => Promise<readonly ResolvedAddress[]>;

/** The system resolver (getaddrinfo, as every other client on the machine resolves). */
export const systemResolver: HostResolver = async (hostname) =>
  (await dnsLookup(hostname, { all: true, verbatim: true })).map(({ address, family }) => ({
    address,
    family: family === 6 ? 6 : 4,
  }));

/** A connection refused by the guard: the error kind `blocked` of the attempt log. */
export class BlockedTargetError extends Error {
  override readonly name = 'BlockedTargetError';
  readonly code = 'ERR_WEBHOOK_TARGET_BLOCKED';
}

/**
 * A `lookup` for `net.connect` (undici's `connect.lookup`): resolves with `resolve`, refuses the host
 * when any of its addresses is refused by `guard` (an attacker's name that mixes public and private
 * answers is refused too), and hands the connection only the addresses it checked.
 */
export function guardedLookup(resolve: HostResolver, guard: AddressGuard): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (resolved) => {
        const addresses = resolved.filter(({ family }) => !options.family || options.family === family);
        for (const { address } of addresses) {
          const reason = guard.refusal(address);
          if (reason !== undefined) {
            callback(new BlockedTargetError(`${hostname} resolves to ${address}: ${reason}`), '');
            return;
          }
        }
        const first = addresses[0];
        if (first === undefined) {
          callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '');
        } else if (options.all) {
          callback(
            null,
            addresses.map(({ address, family }) => ({ address, family })),
          );
        } else {
          callback(null, first.address, first.family);
        }
      },
      (error: NodeJS.ErrnoException) => callback(error, ''),
    );
  };
}
