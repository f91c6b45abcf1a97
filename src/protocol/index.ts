// shadowfs/protocol: the daemon's protocol as typed data (methods, notifications, error codes,
// schemas). Loads neither the native module nor winston, and uses no Node APIs.
export * from './errors';
export * from './methods';
export { ShellInfo } from './shell';
export { protocolDocument, protocolMarkdown, type ProtocolDocument } from './document';
