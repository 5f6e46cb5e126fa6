import { z } from 'zod';
import { ConfigError, env, loadConfig } from './config.js';

describe('loadConfig', () => {
  const schema = z.object({
    PORT: env.port(8080),
    KAFKA_BROKERS: env.list().optional(),
    VERBOSE: env.boolean(false),
  });

  it('returns typed, frozen settings with defaults', () => {
    const config = loadConfig(schema, { KAFKA_BROKERS: 'a:9092, b:9092', VERBOSE: 'true' });
    expect(config).toEqual({ PORT: 8080, KAFKA_BROKERS: ['a:9092', 'b:9092'], VERBOSE: true });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('names every invalid variable', () => {
    expect(() => loadConfig(schema, { PORT: 'eighty', VERBOSE: 'maybe' })).toThrow(ConfigError);
    expect(() => loadConfig(schema, { PORT: 'eighty', VERBOSE: 'maybe' })).toThrow(/PORT:[\s\S]*VERBOSE:/);
  });
});
