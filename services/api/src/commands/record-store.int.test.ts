import { jest } from '@jest/globals';
import { EventStore } from '@ofp/event-store';
import { createTestDatabase, testLogger, type TestDatabase } from '@ofp/testing';
import { migrateApi } from '../module.js';
import { RecordStore } from './record-store.js';

// Server-assigned ids (API.md §1) against a real Postgres.

describe('RecordStore.nextId', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
    await migrateApi(db.pool, testLogger());
  });

  afterAll(async () => {
    await db.drop();
  });

  it('hands out distinct ids, taken from the sequence a block per statement, to creates at once and to another process', async () => {
    // Ids need no event store: nextId takes them from the api's sequence alone.
    const store = new EventStore(db.pool, { outbox: false });
    const first = new RecordStore(db.pool, store);
    const second = new RecordStore(db.pool, store);
    const query = jest.spyOn(db.pool, 'query');
    try {
      const ids = await Promise.all(Array.from({ length: 100 }, () => first.nextId()));
      // 100 creates waiting at once share each block's statement: 4 blocks of 32, one statement each.
      expect(query).toHaveBeenCalledTimes(4);
      const others = await Promise.all(Array.from({ length: 40 }, () => second.nextId()));
      const all = [...ids, ...others];
      expect(new Set(all).size).toBe(all.length);
      for (const id of all) expect(Number.isSafeInteger(id) && id > 0).toBe(true);
      // One process's ids come in the sequence's order.
      expect(ids).toEqual([...ids].sort((a, b) => a - b));
    } finally {
      query.mockRestore();
    }
  });
});
