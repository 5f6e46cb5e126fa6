import { narrowScopes } from './scopes.js';

describe('narrowScopes', () => {
  it('grants every allowed scope when none is asked for', () => {
    expect(narrowScopes(undefined, ['write', 'read'])).toEqual(['read', 'write']);
  });

  it('grants a subset that is asked for', () => {
    expect(narrowScopes('read', ['read', 'write'])).toEqual(['read']);
    expect(narrowScopes('write read read', ['read', 'write'])).toEqual(['read', 'write']);
  });

  it('refuses a scope beyond the allowed ones', () => {
    expect(narrowScopes('read operations', ['read', 'write'])).toBeUndefined();
    expect(narrowScopes('admin', ['read'])).toBeUndefined();
  });

  it('refuses a malformed list', () => {
    expect(narrowScopes('', ['read'])).toBeUndefined();
    expect(narrowScopes('read  write', ['read', 'write'])).toBeUndefined();
    expect(narrowScopes('"read"', ['read'])).toBeUndefined();
  });
});
