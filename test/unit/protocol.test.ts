// Unit tests of the protocol as data: the schema checks the daemon runs before touching
// anything, method lookup, how shadowfs error codes travel as JSON-RPC error codes, and the
// JSON document (protocol.schema.json) the docs, MCP server and PowerShell module come from.
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { ErrorCodes, type ErrorCode } from '../../src/common/errors';
import {
  checkParams,
  FormerErrorCodes,
  isErrorCode,
  isMethod,
  protocolDocument,
  protocolMarkdown,
  Requests,
  RpcErrorCodes,
  rpcCodeFor,
} from '../../src/protocol';

function problem(r: ReturnType<typeof checkParams>): string {
  return r.ok ? '' : r.problem;
}

describe('unit: protocol', () => {
  it('accepts well-formed parameters, with optional ones left out', () => {
    assert.ok(checkParams('mount', { folder: '/x' }).ok);
    assert.ok(checkParams('mount', { folder: '/x', name: 'n', cacheTimeout: 5 }).ok);
    assert.ok(checkParams('activate', { shadow: 's', agent: null }).ok);
    assert.ok(checkParams('run', { shadow: 's', agent: 'a', argv: ['node', '-v'], env: ['A=1'] }).ok);
    assert.ok(checkParams('list', undefined).ok);
    assert.ok(checkParams('layer.write', { shadow: 's', agent: 'a', path: 'x', data: '' }).ok, 'empty content');
  });

  it('names the first problem: unknown, missing, wrong type, NUL bytes, non-finite numbers, non-objects', () => {
    assert.match(problem(checkParams('mount', { folder: '/x', extra: 1 })), /unknown parameter "extra"/);
    assert.match(problem(checkParams('mount', {})), /missing parameter "folder"/);
    assert.match(problem(checkParams('mount', { folder: 3 })), /parameter "folder": .*expected string/);
    assert.match(problem(checkParams('mount', { folder: 'a\0b' })), /NUL byte/);
    assert.match(problem(checkParams('mount', { folder: '/x', cacheTimeout: Infinity })), /"cacheTimeout"/);
    assert.match(problem(checkParams('mount', { folder: '/x', cacheTimeout: -1 })), /"cacheTimeout"/);
    assert.match(problem(checkParams('run', { shadow: 's', agent: 'a', argv: ['ok', 1] })), /"argv.1"/);
    assert.match(problem(checkParams('run', { shadow: 's', agent: 'a', argv: ['a\0'] })), /NUL byte/);
    assert.match(problem(checkParams('run', { shadow: 's', agent: 'a', argv: [] })), /"argv"/);
    assert.match(problem(checkParams('activate', { shadow: 's', agent: 7 })), /"agent"/);
    assert.match(problem(checkParams('layer.write', { shadow: 's', agent: 'a', path: 'x', data: 'not base64!' })), /"data"/);
    assert.match(problem(checkParams('layer.write', { shadow: 's', agent: 'a', path: 'x', data: '', mode: 0o170000 })), /"mode"/);
    assert.match(problem(checkParams('view.close', { shadow: 's', view: 1.5 })), /"view"/);
    for (const p of ['x', [1], 5, true]) assert.match(problem(checkParams('list', p)), /params must be an object/);
  });

  it('refuses, never throws on, a value whose length has no primitive form (a fuzzed hello found it)', () => {
    const hostile = { length: { toString: 'not callable', valueOf: 7 } };
    const r = checkParams('hello', { client: hostile });
    assert.strictEqual(r.ok, false);
    assert.match(problem(r), /wrong kind|client/);
    assert.strictEqual(checkParams('layer.write', { shadow: 's', agent: 'a', path: hostile, content: '' }).ok, false);
  });

  it('knows its own methods and nothing from the object prototype', () => {
    assert.ok(isMethod('layer.write'));
    for (const name of ['toString', '__proto__', 'constructor', 'hasOwnProperty', 'nope', 3]) assert.ok(!isMethod(name), String(name));
  });

  it('maps every shadowfs error code to a documented JSON-RPC error code', () => {
    const documented = new Set<number>(Object.values(RpcErrorCodes));
    for (const code of Object.keys(ErrorCodes) as ErrorCode[]) assert.ok(documented.has(rpcCodeFor(code)), code);
    assert.strictEqual(rpcCodeFor('INVALID_PATH'), RpcErrorCodes.InvalidPath);
    assert.strictEqual(rpcCodeFor('LAYER_BUSY'), RpcErrorCodes.Busy);
    assert.strictEqual(rpcCodeFor('PEER_REFUSED'), RpcErrorCodes.PeerRefused);
    assert.strictEqual(rpcCodeFor('WINFSP_MISSING'), RpcErrorCodes.NotSupported);
  });

  it('a renamed error code keeps its former name in the table, which points to the new one', () => {
    for (const [former, now] of Object.entries(FormerErrorCodes)) {
      assert.ok(isErrorCode(now), `${now} is not a code`);
      assert.ok(isErrorCode(former), `${former} left the table before protocol version 3`);
      assert.strictEqual(ErrorCodes[former as ErrorCode], `Former name of ${now}; no longer sent.`);
      assert.strictEqual(rpcCodeFor(former as ErrorCode), rpcCodeFor(now));
      // No request documents a former name: only the new one is sent.
      for (const [method, def] of Object.entries(Requests))
        assert.ok(!def.errors.includes(former as never), `${method} documents ${former}`);
    }
    assert.deepStrictEqual(Object.keys(FormerErrorCodes).sort(), [
      'LOWER_INSIDE_MOUNTPOINT',
      'LOWER_NOT_DIRECTORY',
      'LOWER_NOT_FOUND',
      'MOUNTPOINT_INSIDE_LOWER',
    ]);
  });

  it('describes every method, notification and error code as JSON Schema', () => {
    const doc = protocolDocument();
    assert.deepStrictEqual(Object.keys(doc.methods).sort(), Object.keys(Requests).sort());
    for (const [name, m] of Object.entries(doc.methods)) {
      const params = m.params as { type?: string; additionalProperties?: unknown };
      assert.strictEqual(params.type, 'object', name);
      assert.strictEqual(params.additionalProperties, false, `${name}: unknown parameters are refused, and the schema says so`);
      assert.strictEqual((m.result as { type?: string }).type, 'object', name);
      assert.ok(m.summary.length > 10, name);
      for (const e of m.errors) assert.ok(e in ErrorCodes, `${name} documents an unknown error code ${e}`);
    }
    assert.deepStrictEqual(Object.keys(doc.notifications).sort(), [
      'daemon/waiting',
      'layer/changed',
      'radar/changed',
      'run/output',
      'run/queued',
      'shadow/changed',
      'shell/exit',
      'shell/output',
    ]);
    assert.deepStrictEqual(Object.keys(doc.errorCodes).sort(), Object.keys(ErrorCodes).sort());
    // It is plain JSON (what build writes to dist/protocol.schema.json).
    assert.deepStrictEqual(JSON.parse(JSON.stringify(doc)), doc);
    const built = path.join(__dirname, '..', '..', 'protocol.schema.json');
    assert.ok(fs.existsSync(built), `${built} is written by npm run build`);
    assert.deepStrictEqual(JSON.parse(fs.readFileSync(built, 'utf8')), doc, 'dist/protocol.schema.json is current');
  });

  it("docs/protocol.md's generated section is the one rendered from the schema", () => {
    const reference = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'docs', 'protocol.md'), 'utf8');
    const m = /<!-- protocol:begin[^>]*-->\n([\s\S]*?)\n<!-- protocol:end -->/.exec(reference);
    assert.ok(m, 'docs/protocol.md has the protocol markers');
    assert.strictEqual(m[1], protocolMarkdown(), 'docs/protocol.md is out of date: run npm run docs (it rewrites the section)');
  });
});
