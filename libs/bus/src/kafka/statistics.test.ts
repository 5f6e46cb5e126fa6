import { KafkaStatistics } from './statistics.js';

/** librdkafka's statistics JSON of one client, with only the fields read here. */
function report(name: string, brokers: Record<string, Record<string, unknown>>): string {
  const entries = Object.entries(brokers).map(([key, fields]) => [
    key,
    {
      name: key,
      nodeid: -1,
      source: 'learned',
      state: 'UP',
      outbuf_cnt: 0,
      waitresp_cnt: 0,
      connects: 0,
      disconnects: 0,
      req_timeouts: 0,
      txretries: 0,
      ...fields,
    },
  ]);
  return JSON.stringify({ name, type: 'producer', brokers: Object.fromEntries(entries) });
}

describe("librdkafka's statistics", () => {
  let now = 0;
  const statistics = () => new KafkaStatistics(1_000, () => now);
  beforeEach(() => (now = 1_000_000));

  it('add what each client reported since its previous report, so that a client closed and another made do not take the counters back', () => {
    const kept = statistics();
    kept.record('admin', report('ofp#producer-1', { 'k1:9092/1': { nodeid: 1, connects: 1 } }));
    kept.record(
      'admin',
      report('ofp#producer-1', { 'k1:9092/1': { nodeid: 1, connects: 40, disconnects: 39 } }),
    );
    // A new admin client (the previous one dropped): its counters start again from 0.
    kept.record('admin', report('ofp#producer-2', { 'k1:9092/1': { nodeid: 1, connects: 2, txretries: 3 } }));
    kept.record(
      'consumer',
      report('ofp#consumer-3', { 'k1:9092/1': { nodeid: 1, connects: 1, req_timeouts: 1 } }),
    );
    expect(kept.counts()).toEqual([
      {
        role: 'admin',
        broker: '1',
        counts: { connects: 42, disconnects: 39, requestTimeouts: 0, requestRetries: 3 },
      },
      {
        role: 'consumer',
        broker: '1',
        counts: { connects: 1, disconnects: 0, requestTimeouts: 1, requestRetries: 0 },
      },
    ]);
  });

  it('name a broker by its node id, a bootstrap address as bootstrap and a logical broker by its name, and leave out the internal one', () => {
    const kept = statistics();
    kept.record(
      'consumer',
      report('ofp#consumer-1', {
        'k1:9092/bootstrap': { connects: 1 },
        'k2:9092/bootstrap': { connects: 1 },
        'k2:9092/2': { nodeid: 2, connects: 1 },
        GroupCoordinator: { nodeid: 2, source: 'logical', connects: 1 },
        ':0/internal': { source: 'internal', state: 'INIT' },
      }),
    );
    expect(kept.counts().map(({ broker, counts }) => [broker, counts.connects])).toEqual([
      ['bootstrap', 2],
      ['2', 1],
      ['GroupCoordinator', 1],
    ]);
  });

  it('count the clients per state of their connection and sum their waiting requests, of the clients heard from within three intervals', () => {
    const kept = statistics();
    kept.record(
      'producer',
      report('ofp#producer-1', { 'k1:9092/1': { nodeid: 1, state: 'UP', outbuf_cnt: 2, waitresp_cnt: 5 } }),
    );
    now += 2_500;
    kept.record(
      'producer',
      report('ofp#producer-2', { 'k1:9092/1': { nodeid: 1, state: 'TRY_CONNECT', outbuf_cnt: 1 } }),
    );
    expect(kept.connections()).toEqual([
      { role: 'producer', broker: '1', states: { UP: 1, TRY_CONNECT: 1 }, outbuf: 3, waitresp: 5 },
    ]);
    // The first one closed: no report for more than three intervals.
    now += 1_000;
    expect(kept.connections()).toEqual([
      { role: 'producer', broker: '1', states: { TRY_CONNECT: 1 }, outbuf: 1, waitresp: 0 },
    ]);
    expect(kept.counts()).toHaveLength(1);
  });

  it('have admin clients report every second, which a process replaces after a failed request, and forget them after three seconds of silence', () => {
    const platform = new KafkaStatistics(10_000, () => now);
    expect(platform.clientConfig('admin')['statistics.interval.ms']).toBe(1_000);
    expect(platform.clientConfig('producer')['statistics.interval.ms']).toBe(10_000);
    expect(platform.clientConfig('consumer')['statistics.interval.ms']).toBe(10_000);
    platform.record('admin', report('ofp#producer-1', { 'k1:9092/1': { nodeid: 1, state: 'TRY_CONNECT' } }));
    platform.record('producer', report('ofp#producer-2', { 'k1:9092/1': { nodeid: 1, state: 'UP' } }));
    now += 3_500;
    expect(platform.connections()).toEqual([
      { role: 'producer', broker: '1', states: { UP: 1 }, outbuf: 0, waitresp: 0 },
    ]);
  });
});
