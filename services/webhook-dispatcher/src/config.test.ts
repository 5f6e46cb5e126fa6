import { z } from 'zod';
import { DEFAULT_LIMITS, webhookDispatcherConfigShape, webhookDispatcherSettings } from './config.js';

const parse = (env: Record<string, string>) => z.object(webhookDispatcherConfigShape).safeParse(env);

describe('the dispatcher settings', () => {
  it('keeps finished deliveries 30 days unless told otherwise, and never less than recover reaches', () => {
    const defaults = parse({});
    expect(defaults.success && webhookDispatcherSettings(defaults.data).limits.retentionDays).toBe(
      DEFAULT_LIMITS.retentionDays,
    );
    const longer = parse({ WEBHOOK_DELIVERY_RETENTION_DAYS: '90' });
    expect(longer.success && webhookDispatcherSettings(longer.data).limits.retentionDays).toBe(90);
    const shorter = parse({ WEBHOOK_DELIVERY_RETENTION_DAYS: '7' });
    expect(shorter.success).toBe(false);
    expect(shorter.error?.issues[0]?.message).toBe('must be at least 14 (recover’s reach)');
  });
});
