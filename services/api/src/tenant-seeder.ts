import { isDomainError } from '@ofp/contracts';
import { PHONE_NUMBER_TYPE_SEEDS, phoneNumberTypes } from '@ofp/models';
import type { Pool } from '@ofp/runtime';
import type { RecordCommands } from './commands/record-commands.js';
import type { UniqueValues } from './commands/unique-values.js';
import type { ReadYourWrites } from './queries/read-your-writes.js';

/**
 * Gives every organization its seed records before its first request is served: the phone number
 * types Work, Home, Mobile and Fax "exist from the start" (API.md §6). They are ordinary records,
 * created through the same commands (and events) as any other, once per organization.
 */
export class TenantSeeder {
  private readonly seeded = new Set<number>();
  private readonly inFlight = new Map<number, Promise<void>>();

  constructor(
    private readonly pool: Pool,
    private readonly commands: RecordCommands,
    private readonly unique: UniqueValues,
    private readonly readYourWrites: ReadYourWrites,
  ) {}

  /** Undefined once the organization is seeded (no promise per request), else the seeding's promise. */
  ensureSeeded(orgId: number): Promise<void> | undefined {
    return this.seeded.has(orgId) ? undefined : this.seedOnce(orgId);
  }

  private async seedOnce(orgId: number): Promise<void> {
    let seeding = this.inFlight.get(orgId);
    if (!seeding) {
      seeding = this.seed(orgId).finally(() => this.inFlight.delete(orgId));
      this.inFlight.set(orgId, seeding);
    }
    await seeding;
    this.seeded.add(orgId);
  }

  private async seed(orgId: number): Promise<void> {
    const done = await this.pool.query('SELECT 1 FROM api.seeded_organizations WHERE org_id = $1', [orgId]);
    if (done.rowCount === 1) return;
    // Created one after another, then waited for together: the read model catches up on all at once.
    const projected: Promise<boolean>[] = [];
    for (const name of PHONE_NUMBER_TYPE_SEEDS) {
      if ((await this.unique.lookup(orgId, phoneNumberTypes.name, 'name', name)) !== undefined) continue;
      try {
        const outcome = await this.commands.write(
          phoneNumberTypes,
          { orgId, actor: 'system', requestId: `seed-${orgId}`, by: { kind: 'system' } },
          { kind: 'create', body: { name } },
        );
        projected.push(this.readYourWrites.settle(outcome.written));
      } catch (error) {
        // Another process seeding the same organization at the same moment took the name first.
        if (!(isDomainError(error) && error.kind === 'Conflict')) throw error;
      }
    }
    await Promise.all(projected);
    await this.pool.query(
      'INSERT INTO api.seeded_organizations (org_id) VALUES ($1) ON CONFLICT DO NOTHING',
      [orgId],
    );
  }
}
