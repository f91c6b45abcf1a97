// shadowfs/client: the SDK, the client (./client.ts) and the protocol it speaks (its methods'
// schemas, types and error codes). Code of this package that only needs the client imports
// ./client, which does not load the protocol's schemas (zod).
export * from './client';
export * from '../protocol';
