#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { runOrderctl } from './run-orderctl.js';

const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

// The command-line tool of API.md §10: wraps the admin API.
process.exitCode = await runOrderctl(process.argv.slice(2), {
  env: process.env,
  fetch,
  stdout: (text) => console.log(text),
  stderr: (text) => console.error(text),
  version,
});
