// Unit tests of the protocol as data: parameter checks the daemon runs before touching anything,
// method lookup, and how shadowfs error codes travel as JSON-RPC error codes.
import * as assert from 'assert';
import { ErrorCodes } from '../../src/errors';
import { checkParams, isMethod, Methods, RpcErrorCodes, rpcCodeFor } from '../../src/protocol/messages';

describe('unit: protocol messages', () => {
  it('accepts well-formed parameters, with optional ones left out', () => {
    assert.strictEqual(checkParams('mount', { folder: '/x' }), null);
    assert.strictEqual(checkParams('mount', { folder: '/x', name: 'n', cacheTimeout: 5 }), null);
    assert.strictEqual(checkParams('activate', { shadow: 's', agent: null }), null);
    assert.strictEqual(checkParams('run', { shadow: 's', agent: 'a', argv: ['node', '-v'], env: ['A=1'] }), null);
    assert.strictEqual(checkParams('list', undefined), null);
  });

  it('names the first problem: unknown, missing, wrong type, NUL bytes, non-finite numbers, non-objects', () => {
    assert.match(checkParams('mount', { folder: '/x', extra: 1 }) ?? '', /unknown parameter "extra"/);
    assert.match(checkParams('mount', {}) ?? '', /missing parameter "folder"/);
    assert.match(checkParams('mount', { folder: 3 }) ?? '', /"folder" must be a string/);
    assert.match(checkParams('mount', { folder: 'a\0b' }) ?? '', /NUL byte/);
    assert.match(checkParams('mount', { folder: '/x', cacheTimeout: Infinity }) ?? '', /must be a number/);
    assert.match(checkParams('run', { shadow: 's', agent: 'a', argv: ['ok', 1] }) ?? '', /list of strings/);
    assert.match(checkParams('run', { shadow: 's', agent: 'a', argv: ['a\0'] }) ?? '', /NUL byte/);
    assert.match(checkParams('activate', { shadow: 's', agent: 7 }) ?? '', /string or null/);
    for (const p of [null, 'x', [1], 5]) assert.strictEqual(checkParams('list', p), 'params must be an object');
  });

  it('knows its own methods and nothing from the object prototype', () => {
    assert.ok(isMethod('layer.write'));
    for (const name of ['toString', '__proto__', 'constructor', 'hasOwnProperty', 'nope', 3]) assert.ok(!isMethod(name), String(name));
  });

  it('maps every shadowfs error code to a documented JSON-RPC error code', () => {
    const documented = new Set<number>(Object.values(RpcErrorCodes));
    for (const code of Object.keys(ErrorCodes)) assert.ok(documented.has(rpcCodeFor(code)), code);
    assert.strictEqual(rpcCodeFor('INVALID_PATH'), RpcErrorCodes.InvalidPath);
    assert.strictEqual(rpcCodeFor('LAYER_BUSY'), RpcErrorCodes.Busy);
    assert.strictEqual(rpcCodeFor('SOMETHING_NEW'), RpcErrorCodes.Failed);
  });

  it('gives every method a parameter spec of known kinds', () => {
    const kinds = new Set(['string', 'number', 'boolean', 'string|null', 'string[]']);
    for (const [name, m] of Object.entries(Methods)) {
      for (const [key, kind] of Object.entries(m.params)) assert.ok(kinds.has(kind.replace('?', '')), `${name}.${key}: ${kind}`);
    }
  });
});
