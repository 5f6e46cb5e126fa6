export * from './config.js';
export * from './platform.js';
export * from './descriptions.js';
export * from './generated-docs.js';
export * from './modules.js';
