import * as assert from 'assert';
import type { ShadowInfo } from 'shadowfs/client';
import { daemonEnv, mcpServerLabel, mcpServerSpecs } from '../../src/mcpServers';

const shadow = (name: string, agents: string[]): ShadowInfo => ({
  name,
  folder: `/home/u/${name}`,
  lower: `/home/u/${name}`,
  mountPoint: `/run/user/1/shadowfs/${name}`,
  backend: 'fuse_ll',
  mounted: true,
  active: null,
  agents,
  views: [],
  idleSeconds: 0,
});

describe("extension: the MCP servers offered to VS Code's agent mode", () => {
  it('offers one `shadowfs mcp` per shadow and agent, sorted, with the same executable and the daemon-locating variables', () => {
    const specs = mcpServerSpecs(
      [shadow('zeta', ['b']), shadow('alpha', ['codex', 'claude']), shadow('empty', [])],
      '/usr/bin/shadowfs',
      '1.2.3',
      { XDG_RUNTIME_DIR: '/run/user/1' },
      'linux',
    );
    assert.deepStrictEqual(
      specs.map((s) => [s.label, s.command, ...s.args]),
      [
        ['shadowfs: claude in alpha', '/usr/bin/shadowfs', 'mcp', '--shadow=alpha', '--agent=claude'],
        ['shadowfs: codex in alpha', '/usr/bin/shadowfs', 'mcp', '--shadow=alpha', '--agent=codex'],
        ['shadowfs: b in zeta', '/usr/bin/shadowfs', 'mcp', '--shadow=zeta', '--agent=b'],
      ],
    );
    assert.deepStrictEqual(specs[0].env, { XDG_RUNTIME_DIR: '/run/user/1' });
    assert.notStrictEqual(specs[0].env, specs[1].env, 'each server has its own env object');
    assert.strictEqual(specs[0].version, '1.2.3');
    assert.deepStrictEqual([specs[0].shadow, specs[0].agent], ['alpha', 'claude']);
    assert.strictEqual(mcpServerLabel('s', 'a'), 'shadowfs: a in s');
  });

  it('passes on only the variables that say where the daemon is, and only when set', () => {
    assert.deepStrictEqual(daemonEnv({ XDG_RUNTIME_DIR: '/r', SHADOWFS_STATE_DIR: '/s', HOME: '/h', SECRET: 'x' }), {
      XDG_RUNTIME_DIR: '/r',
      SHADOWFS_STATE_DIR: '/s',
    });
    assert.deepStrictEqual(daemonEnv({ XDG_RUNTIME_DIR: '' }), {});
  });
});
