#!/usr/bin/env node
// Process entry point. Telemetry starts first and everything else is imported afterwards, so that the
// OpenTelemetry instrumentations hook http and pg before those modules load.
import { startTelemetry } from '@ofp/runtime/telemetry';

const shutdownTelemetry = await startTelemetry(process.env, `ofp-${process.env.TARGET ?? 'all'}`);
const { runPlatform } = await import('./platform.js');
const { exitOnStartupError } = await import('@ofp/runtime');
// A person's mistake found at start is one line and exit code 1, never a stack trace.
await runPlatform(process.env, shutdownTelemetry).catch(exitOnStartupError);
