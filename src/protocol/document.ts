// The protocol as one JSON document (JSON Schema for every parameter and result), and the
// protocol section of docs/protocol.md rendered from it. `npm run build` writes the document to
// dist/protocol.schema.json (package export "shadowfs/protocol.schema.json").
import * as z from 'zod';
import { ErrorCodes, RpcErrorCodes, rpcCodeFor, type ErrorCode } from './errors';
import { Notifications, PROTOCOL_VERSION, Requests, ScopedMethods } from './methods';

export interface ProtocolDocument {
  $schema: string;
  title: string;
  protocol: number;
  transport: string;
  methods: Record<string, { summary: string; params: object; result: object; errors: string[]; scoped?: string }>;
  notifications: Record<string, { summary: string; params: object }>;
  errorCodes: Record<string, { description: string; rpcCode: number }>;
  rpcErrorCodes: Record<string, number>;
}

function schemaOf(schema: z.ZodType, io: 'input' | 'output'): object {
  const json = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  delete json.$schema;
  return json;
}

export function protocolDocument(): ProtocolDocument {
  const methods: ProtocolDocument['methods'] = {};
  for (const [name, def] of Object.entries(Requests)) {
    methods[name] = {
      summary: def.summary,
      params: schemaOf(def.params, 'input'),
      result: schemaOf(def.result, 'output'),
      errors: [...def.errors, 'INTERNAL'],
      ...(Object.prototype.hasOwnProperty.call(ScopedMethods, name) ? { scoped: ScopedMethods[name as keyof typeof ScopedMethods] } : {}),
    };
  }
  const notifications: ProtocolDocument['notifications'] = {};
  for (const [name, def] of Object.entries(Notifications))
    notifications[name] = { summary: def.summary, params: schemaOf(def.params, 'output') };
  const errorCodes: ProtocolDocument['errorCodes'] = {};
  for (const [code, description] of Object.entries(ErrorCodes)) errorCodes[code] = { description, rpcCode: rpcCodeFor(code as ErrorCode) };
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: 'shadowfs daemon protocol',
    protocol: PROTOCOL_VERSION,
    transport:
      'JSON-RPC 2.0 with LSP-style framing (Content-Length header), over a Unix socket (Linux) or a named pipe (Windows). Parameters by name. Errors carry the shadowfs code in error.data.code.',
    methods,
    notifications,
    errorCodes,
    rpcErrorCodes: { ...RpcErrorCodes },
  };
}

/** A one-line rendering of a parameter object's fields: `name: type`, optional ones with "?". */
function fields(schema: object): string {
  const s = schema as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
  const props = Object.entries(s.properties ?? {});
  if (!props.length) return '—';
  return props.map(([k]) => `\`${k}${s.required?.includes(k) ? '' : '?'}\``).join(', ');
}

/** The protocol section of docs/protocol.md (between its markers), rendered from the document. */
export function protocolMarkdown(doc: ProtocolDocument = protocolDocument()): string {
  const lines: string[] = [];
  lines.push(`Protocol version ${doc.protocol}. ${doc.transport}`, '');
  lines.push('| Method | Parameters | Errors (`error.data.code`) | What it does |', '|---|---|---|---|');
  for (const [name, m] of Object.entries(doc.methods)) {
    const errs = m.errors.filter((e) => e !== 'INTERNAL');
    lines.push(
      `| \`${name}\` | ${fields(m.params)} | ${errs.length ? errs.map((e) => `\`${e}\``).join(' ') : '—'} | ${m.summary.replace(/\|/g, '\\|')} |`,
    );
  }
  lines.push(
    '',
    'A connection restricted with `session.restrict` may call only these methods, on these terms; every other one gets `SCOPE_DENIED`:',
    '',
    '| Method | Allowed for a restricted connection |',
    '|---|---|',
  );
  for (const [name, m] of Object.entries(doc.methods)) if (m.scoped) lines.push(`| \`${name}\` | ${m.scoped.replace(/\|/g, '\\|')} |`);
  lines.push('', '| Notification | Parameters | When |', '|---|---|---|');
  for (const [name, n] of Object.entries(doc.notifications)) lines.push(`| \`${name}\` | ${fields(n.params)} | ${n.summary} |`);
  lines.push('', '| `error.data.code` | JSON-RPC `error.code` | Meaning |', '|---|---|---|');
  for (const [code, e] of Object.entries(doc.errorCodes))
    lines.push(`| \`${code}\` | ${e.rpcCode} | ${e.description.replace(/\|/g, '\\|')} |`);
  return lines.join('\n');
}
