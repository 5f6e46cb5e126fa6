import type { Admin, Kafka } from './kafka-javascript.js';

/** One admin client and the requests made through it that have not settled yet. */
interface Lease {
  readonly admin: Admin;
  readonly connected: Promise<void>;
  inFlight: number;
  disconnected?: Promise<void>;
  /** Resolves the {@link ReplaceableAdmin.close} that waits for this lease's last request. */
  idle?: () => void;
}

/**
 * An admin client shared by concurrent readers (lag metrics, the consumer watchdogs, a readiness
 * check): connected at its first use, and replaced after a request through it fails, so that the next
 * request bootstraps a new client from every broker's address (after a broker is killed, librdkafka's
 * admin client kept timing out its metadata and offsets reads for a minute and more, while a new
 * client answered at once: kafka-bus.int, kafka-broker.int).
 *
 * A replaced client is disconnected only once every request made through it has settled.
 * @confluentinc/kafka-javascript's admin disconnect is synchronous (rd_kafka_destroy on the JS thread),
 * and librdkafka waits there for the requests still in flight: one to a broker that hangs held the
 * whole process's event loop until its timeout. The chaos run's api answered nothing for 3 to 25 s
 * while a broker was paused (a lag read failed, the client was dropped while the other groups' reads
 * were waiting on that broker); with nothing in flight the same disconnect takes a few milliseconds.
 */
export class ReplaceableAdmin {
  private current: Lease | undefined;

  constructor(private readonly kafka: Kafka) {}

  /** Runs `request` on the current client; a failure retires it, and the next request connects another. */
  async use<T>(request: (admin: Admin) => Promise<T>): Promise<T> {
    const lease = (this.current ??= this.lease());
    lease.inFlight++;
    try {
      await lease.connected;
      return await request(lease.admin);
    } catch (error) {
      this.retire(lease);
      throw error;
    } finally {
      lease.inFlight--;
      // Retired (no longer the current client) and idle: nothing of it can block the disconnect.
      if (this.current !== lease && lease.inFlight === 0) void this.disconnect(lease);
    }
  }

  /** Retires the current client and resolves once it is disconnected, after its last request settles. */
  async close(): Promise<void> {
    const lease = this.current;
    if (!lease) return;
    this.retire(lease);
    if (lease.inFlight > 0) await new Promise<void>((resolve) => (lease.idle = resolve));
    await this.disconnect(lease);
  }

  private lease(): Lease {
    const admin = this.kafka.admin();
    const connected = admin.connect();
    // A failed connection is the failure of the requests waiting for it (use's catch).
    connected.catch(() => {});
    return { admin, connected, inFlight: 0 };
  }

  /** Makes `lease` no longer the current client: the next request connects another. */
  private retire(lease: Lease): void {
    if (this.current === lease) this.current = undefined;
  }

  private disconnect(lease: Lease): Promise<void> {
    lease.idle?.();
    lease.disconnected ??= lease.connected
      .catch(() => {})
      .then(() => lease.admin.disconnect())
      .catch(() => {});
    return lease.disconnected;
  }
}
