import * as assert from 'assert';
import type { ChangeInfo, Overlap, ShadowInfo, ShellInfo } from 'shadowfs/client';
import {
  baseName,
  countChanges,
  describeCounts,
  describeExcluded,
  excludedGroupDescription,
  excludedGroupLabel,
  groupChanges,
  kindLetter,
  overlapDescription,
  overlapDetail,
  parentOf,
  sessionLabel,
  sessionState,
  ShadowsModel,
  visibleChanges,
} from '../../src/model';
import { agentIdProblem, uniqueAgentName } from '../../src/names';

const change = (
  path: string,
  kind: ChangeInfo['kind'],
  type: ChangeInfo['type'] = 'file',
  excluded?: ChangeInfo['excluded'],
): ChangeInfo => ({
  path,
  kind,
  type,
  ...(excluded ? { excluded } : {}),
});
/** What layer.changes answers after an agent edited a file, ran git add and git commit, and built into an ignored folder. */
const afterGit = (): ChangeInfo[] => [
  change('src/app.ts', 'modified'),
  change('src', 'modified', 'directory'),
  change('.git', 'modified', 'directory', 'repository-metadata'),
  change('.git/index', 'modified', 'file', 'repository-metadata'),
  change('.git/logs', 'added', 'directory', 'repository-metadata'),
  change('.git/logs/HEAD', 'added', 'file', 'repository-metadata'),
  change('.git/objects/ab', 'added', 'directory', 'repository-metadata'),
  change('.git/objects/ab/cdef', 'added', 'file', 'repository-metadata'),
  change('vendor/lib/.git', 'added', 'file', 'repository-metadata'),
  change('build', 'added', 'directory', 'ignored'),
  change('build/out.js', 'added', 'file', 'ignored'),
  change('debug.log', 'added', 'file', 'ignored'),
  change('.git/old-hook', 'deleted', 'file', 'repository-metadata'),
];
const shadow = (name: string, agents: string[], active: string | null, mounted = true): ShadowInfo => ({
  name,
  folder: `/home/u/${name}`,
  lower: `/home/u/${name}`,
  mountPoint: `/run/user/1/shadowfs/${name}`,
  backend: 'fuse_ll',
  mounted,
  active,
  agents,
  views: [],
  idleSeconds: 0,
});

describe('extension: the Shadows view model', () => {
  it('shows files, symlinks and deleted directories, sorted; not the directories holding changed files', () => {
    const v = visibleChanges([
      change('src/b.ts', 'modified'),
      change('src', 'modified', 'directory'),
      change('new', 'added', 'directory'),
      change('new/x.md', 'added'),
      change('gone', 'deleted', 'directory'),
      change('link', 'added', 'symlink'),
      change('a.txt', 'deleted'),
    ]);
    assert.deepStrictEqual(
      v.map((c) => c.path),
      ['a.txt', 'gone', 'link', 'new/x.md', 'src/b.ts'],
    );
  });

  it('counts and describes changes by kind', () => {
    const cs = [
      change('a', 'added'),
      change('b', 'added'),
      change('c', 'modified'),
      change('d', 'metadata'),
      change('dir', 'added', 'directory'),
    ];
    assert.deepStrictEqual(countChanges(cs), { added: 2, modified: 1, deleted: 0, metadata: 1 });
    assert.strictEqual(describeCounts(cs), '2 added, 1 modified, 1 metadata');
    assert.strictEqual(describeCounts([]), 'no changes');
    assert.strictEqual(describeCounts(undefined), '');
    assert.deepStrictEqual(
      ['added', 'modified', 'deleted', 'metadata'].map((k) => kindLetter(k as ChangeInfo['kind'])),
      ['A', 'M', 'D', 'P'],
    );
  });

  it('keeps what diff, patch and apply leave out apart from the work, grouped by reason, and counts only the work', () => {
    const { work, excluded } = groupChanges(afterGit());
    assert.deepStrictEqual(
      work.map((c) => c.path),
      ['src/app.ts'],
    );
    assert.deepStrictEqual(
      excluded['repository-metadata'].map((c) => c.path),
      ['.git/index', '.git/logs/HEAD', '.git/objects/ab/cdef', '.git/old-hook', 'vendor/lib/.git'],
    );
    assert.deepStrictEqual(
      excluded.ignored.map((c) => c.path),
      ['build/out.js', 'debug.log'],
    );
    assert.deepStrictEqual(countChanges(afterGit()), { added: 0, modified: 1, deleted: 0, metadata: 0 });
    assert.strictEqual(describeCounts(afterGit()), '1 modified · 7 not applied');
    assert.strictEqual(describeCounts([change('.git/index', 'modified', 'file', 'repository-metadata')]), 'no changes · 1 not applied');
    assert.strictEqual(excludedGroupLabel('repository-metadata'), 'Repository metadata (.git)');
    assert.strictEqual(excludedGroupDescription('repository-metadata', 14), '14 · not applied');
    assert.strictEqual(excludedGroupLabel('ignored'), 'Ignored by git');
    assert.strictEqual(excludedGroupDescription('ignored', 2), '2 · not applied unless included');
  });

  it('says what a result left out, counted by reason', () => {
    assert.strictEqual(describeExcluded([]), '');
    assert.strictEqual(describeExcluded(undefined), '');
    assert.strictEqual(
      describeExcluded([
        { path: '.git/index', reason: 'repository-metadata' },
        { path: '.git/HEAD', reason: 'repository-metadata' },
        { path: 'debug.log', reason: 'ignored' },
      ]),
      '2 in .git (never applied), 1 ignored by git',
    );
    assert.strictEqual(describeExcluded([{ path: 'x.log', reason: 'ignored' }]), '1 ignored by git');
  });

  it("lists a layer's work as its files and what is left out in groups (the empty ones omitted), each entry under its group", () => {
    const m = new ShadowsModel();
    m.setShadows([shadow('web', ['alice', 'bob'], 'alice')]);
    m.setChanges('web', 'alice', afterGit());
    assert.deepStrictEqual(
      m.files('web', 'alice').map((f) => f.change.path),
      ['src/app.ts'],
    );
    const groups = m.excludedGroups('web', 'alice');
    assert.deepStrictEqual(
      groups.map((g) => [g.reason, g.changes.length]),
      [
        ['repository-metadata', 5],
        ['ignored', 2],
      ],
    );
    const meta = m.excludedFiles(groups[0]);
    assert.ok(meta.every((f) => f.kind === 'file' && f.folder === '/home/u/web' && f.change.excluded === 'repository-metadata'));
    assert.deepStrictEqual(
      m.excludedFiles(groups[1]).map((f) => f.change.path),
      ['build/out.js', 'debug.log'],
    );
    m.setChanges('web', 'bob', [change('.git/index', 'modified', 'file', 'repository-metadata')]);
    assert.deepStrictEqual(m.files('web', 'bob'), [], 'a layer with only git changes has no work');
    assert.deepStrictEqual(
      m.excludedGroups('web', 'bob').map((g) => g.reason),
      ['repository-metadata'],
    );
    m.setChanges('web', 'bob', [change('a.txt', 'added')]);
    assert.deepStrictEqual(m.excludedGroups('web', 'bob'), []);
    assert.deepStrictEqual(m.excludedGroups('nosuch', 'bob'), []);
  });

  it('splits paths for labels', () => {
    assert.strictEqual(parentOf('a/b/c.ts'), 'a/b');
    assert.strictEqual(parentOf('c.ts'), '');
    assert.strictEqual(baseName('a/b/c.ts'), 'c.ts');
    assert.strictEqual(baseName('c.ts'), 'c.ts');
  });

  it('builds shadows → layers (active marked) → files, and forgets layers that are gone', () => {
    const m = new ShadowsModel();
    m.setShadows([shadow('web', ['bob', 'alice'], 'bob'), shadow('api', [], null)]);
    assert.deepStrictEqual(
      m.roots().map((r) => r.info.name),
      ['api', 'web'],
    );
    m.setChanges('web', 'alice', [change('x.ts', 'modified')]);
    const layers = m.layers('web');
    assert.deepStrictEqual(
      layers.map((l) => [l.agent, l.active, l.changes?.length]),
      [
        ['alice', false, 1],
        ['bob', true, undefined],
      ],
    );
    const files = m.files('web', 'alice');
    assert.strictEqual(files.length, 1);
    assert.strictEqual(files[0].folder, '/home/u/web');
    assert.strictEqual(m.changeAt('web', 'alice', 'x.ts')?.kind, 'modified');
    assert.deepStrictEqual(m.files('web', 'bob'), [], 'changes not loaded yet: no files');

    m.setError('web', 'bob', 'boom');
    assert.strictEqual(m.layers('web')[1].error, 'boom');

    m.setShadows([shadow('web', ['bob'], null)]);
    assert.strictEqual(m.changeAt('web', 'alice', 'x.ts'), undefined, 'a dropped layer forgets its changes');
    assert.strictEqual(m.layers('web')[0].active, false);
    assert.deepStrictEqual(m.layers('nosuch'), []);
    assert.strictEqual(m.shadowOfFolder('/home/u/web/', (a, b) => a.replace(/\/$/, '') === b.replace(/\/$/, ''))?.name, 'web');
  });

  it('names a new agent uniquely', () => {
    assert.strictEqual(uniqueAgentName('vscode', []), 'vscode');
    assert.strictEqual(uniqueAgentName('vscode', ['vscode', 'vscode-2']), 'vscode-3');
  });

  it("checks a new agent's id as the daemon does", () => {
    assert.strictEqual(agentIdProblem('claude-2'), undefined);
    assert.strictEqual(agentIdProblem('-odd but fine'), undefined);
    assert.strictEqual(agentIdProblem('é'.repeat(127)), undefined, '254 bytes');
    assert.match(agentIdProblem('é'.repeat(128)) ?? '', /255 bytes/);
    assert.match(agentIdProblem('') ?? '', /name the agent/);
    assert.match(agentIdProblem('a/b') ?? '', /no "\/"/);
    assert.match(agentIdProblem('a\u0000b') ?? '', /NUL/);
  });

  it("lists a shadow's shell sessions (running first) and views beside its layers", () => {
    const session = (id: string, shadowName: string, agent: string, running: boolean, more: Partial<ShellInfo> = {}): ShellInfo => ({
      sessionId: id,
      shadow: shadowName,
      agent,
      argv: ['/bin/bash', '-i'],
      cwd: '.',
      pid: 1,
      startedAt: `2026-01-01T00:00:0${id.length}Z`,
      running,
      cols: 80,
      rows: 24,
      attached: running ? 1 : 0,
      protections: [],
      ...more,
    });
    const m = new ShadowsModel();
    m.setShadows([
      {
        ...shadow('web', ['alice', 'bob'], null),
        views: [
          { id: 2, agent: 'bob', mountPoint: '/v/2' },
          { id: 1, agent: 'alice', mountPoint: '/v/1' },
        ],
      },
    ]);
    m.setSessions([
      session('s1', 'web', 'bob', false, { exitCode: 0 }),
      session('s22', 'web', 'bob', true),
      session('s333', 'web', 'alice', true, { attached: 2 }),
      session('s4', 'gone', 'alice', true),
    ]);
    assert.deepStrictEqual(
      m.sessions('web').map((n) => n.info.sessionId),
      ['s333', 's22', 's1'],
    );
    assert.deepStrictEqual(m.sessions('gone'), [], 'a shadow the daemon no longer lists has none');
    assert.deepStrictEqual(
      m.views('web').map((v) => `${v.view.agent} ${v.view.mountPoint}`),
      ['alice /v/1', 'bob /v/2'],
    );
    const [alice, bobRunning, bobDone] = m.sessions('web').map((n) => n.info);
    assert.strictEqual(sessionLabel(alice), 'alice: bash -i');
    assert.strictEqual(sessionState(alice), 'running · 2 attached');
    assert.strictEqual(sessionState(bobRunning), 'running · 1 attached');
    assert.strictEqual(sessionState(bobDone), 'exited 0');
    assert.strictEqual(sessionState({ ...bobDone, exitCode: null, signal: 'SIGHUP' }), 'ended by SIGHUP');
    assert.strictEqual(sessionLabel({ ...alice, argv: [] }), 'alice: shell');
    // The agent's command line cannot turn the label around or break it.
    assert.strictEqual(sessionLabel({ ...alice, argv: ['sh', '-c', 'x\u202e\nsy'] }), 'alice: sh -c x\\u202e\\u000asy');
  });

  it("keeps the radar's overlaps per shadow: agents' collisions first, replaced and cleared by id, and says who collides", () => {
    const layers: Overlap = {
      id: 'layers:src/a.ts',
      kind: 'layers',
      path: 'src/a.ts',
      agents: ['alice', 'bob'],
      since: '2026-01-01T00:00:00Z',
    };
    const folder: Overlap = {
      id: 'folder:bob:README.md',
      kind: 'folder',
      path: 'README.md',
      agents: ['bob'],
      since: '2026-01-01T00:00:01Z',
      folder: { size: 3, mtimeNs: '1' },
    };
    const m = new ShadowsModel();
    m.setShadows([shadow('web', ['alice', 'bob'], null)]);
    assert.strictEqual(m.updateOverlaps('web', [layers], []), false, 'never asked for: the caller asks for all');
    m.setOverlaps('web', [folder, layers]);
    assert.deepStrictEqual(
      m.overlaps('web').map((n) => n.overlap.id),
      ['layers:src/a.ts', 'folder:bob:README.md'],
    );
    assert.strictEqual(m.updateOverlaps('web', [{ ...layers, agents: ['alice', 'bob', 'carol'] }], [folder]), true);
    assert.deepStrictEqual(
      m.overlaps('web').map((n) => n.overlap.agents.join(',')),
      ['alice,bob,carol'],
    );
    assert.strictEqual(overlapDescription(layers), 'changed by alice and bob');
    assert.strictEqual(overlapDescription(folder), 'changed in your folder since bob copied it');
    assert.strictEqual(overlapDescription({ ...folder, folder: null }), 'deleted in your folder since bob copied it');
    assert.match(overlapDetail(layers), /conflict for the second/);
    m.setShadows([]);
    assert.deepStrictEqual(m.overlaps('web'), [], 'a shadow the daemon no longer lists has none');
  });
});
