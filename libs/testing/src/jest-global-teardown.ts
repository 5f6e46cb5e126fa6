/** Stops what the global setup started (once, however many projects ran). */
export default async function globalTeardown(): Promise<void> {
  const infrastructure = globalThis.ofpInfrastructure;
  globalThis.ofpInfrastructure = undefined;
  if (infrastructure) await Promise.all((await infrastructure).map((each) => each.stop()));
}
