export * from './module.js';
export * from './demo-tenant.js';
export { ACCESS_TOKEN_TTL_SECONDS } from './token-lifetime.js';
export { oauthErrorSchema } from './schemas.js';
