#!/usr/bin/env node
import { runOrderctl } from './run-orderctl.js';

// The command-line tool of API.md §10: wraps the admin API.
process.exitCode = await runOrderctl(process.argv.slice(2), {
  env: process.env,
  fetch,
  stdout: (text) => console.log(text),
  stderr: (text) => console.error(text),
});
