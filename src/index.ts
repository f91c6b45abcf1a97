// Public API of the shadowfs package.
export { mount, Shadow } from './shadow';
export type { MountOptions, Change } from './shadow';
export { ShadowError, ErrorCodes } from './errors';
export type { ErrorCode } from './errors';
export { normalizeRelPath } from './paths';
