import { jest } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { SecretsKeyring } from '@ofp/runtime';
import { endpointSecretContext } from '../schema.js';
import { EndpointSecrets } from './endpoint-secrets.js';

const key = (id: string) => ({ id, key: randomBytes(32) });

describe('EndpointSecrets', () => {
  it('opens each stored secret once, and again after it changed or the keys changed', () => {
    const k1 = key('k1');
    const keyring = new SecretsKeyring([k1]);
    const opened = jest.spyOn(keyring, 'open');
    const secrets = new EndpointSecrets(keyring);
    const current = keyring.seal('whsec_current', endpointSecretContext(7));
    const previous = keyring.seal('whsec_previous', endpointSecretContext(7));

    expect(secrets.open(7, current, null)).toEqual(['whsec_current']);
    expect(secrets.open(7, current, null)).toEqual(['whsec_current']);
    expect(opened).toHaveBeenCalledTimes(1);
    // A rotation: both, current first.
    expect(secrets.open(7, current, previous)).toEqual(['whsec_current', 'whsec_previous']);
    expect(opened).toHaveBeenCalledTimes(3);
    // A value moved to another endpoint's row does not open there, kept or not.
    expect(secrets.open(8, current, null)).toEqual({ unopened: expect.stringContaining('does not open') });

    // The key file read again without the key that sealed them: they no longer open.
    keyring.adopt(new SecretsKeyring([key('k2')]));
    expect(secrets.open(7, current, null)).toEqual({ unopened: expect.stringContaining('k1') });
    keyring.adopt(new SecretsKeyring([key('k2'), k1]));
    expect(secrets.open(7, current, null)).toEqual(['whsec_current']);
  });
});
