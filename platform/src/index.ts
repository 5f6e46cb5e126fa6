export * from './config.js';
export * from './platform.js';
export * from './descriptions.js';
export * from './settings-table.js';
