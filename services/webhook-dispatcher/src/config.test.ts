import { z } from 'zod';
import {
  DEFAULT_LIMITS,
  webhookDispatcherConfigShape,
  webhookDispatcherSettings,
  webhookDispatcherSettingsIssues,
} from './config.js';

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

  it('refuses an endpoint limit that is not below the worker pool, naming both settings', () => {
    const issues = (env: Record<string, string>) => {
      const parsed = parse(env);
      if (!parsed.success) throw parsed.error;
      return webhookDispatcherSettingsIssues(parsed.data);
    };
    expect(issues({})).toEqual([]);
    expect(issues({ WEBHOOK_WORKER_CONCURRENCY: '17', WEBHOOK_ENDPOINT_CONCURRENCY: '16' })).toEqual([]);
    for (const perEndpoint of ['16', '64'])
      expect(issues({ WEBHOOK_WORKER_CONCURRENCY: '16', WEBHOOK_ENDPOINT_CONCURRENCY: perEndpoint })).toEqual(
        [
          {
            setting: 'WEBHOOK_ENDPOINT_CONCURRENCY',
            message: expect.stringMatching(
              new RegExp(
                `^\\(${perEndpoint}\\) must be below WEBHOOK_WORKER_CONCURRENCY \\(16\\): one slow endpoint`,
              ),
            ) as unknown,
          },
        ],
      );
  });
});
