// The demo behind `shadowfs demo`: mounts one shadow, lets two "agents" change the project in
// layers of their own (one breaks a test), runs the same check for each agent in turn on the
// one shared mount, and proves the real folder did not change.
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { Change, mount, Shadow } from './shadow';
import { fingerprintTree } from './common/fingerprint';

export const bundledExample = path.join(__dirname, '..', '..', 'examples', 'demo-project');

export interface AgentSummary {
  edited: string[];
  deleted: string[];
  changes: Change[];
  /** Exit status of the project's tests run inside the shadow with this agent's layer (bundled example only). */
  tests?: number | null;
}

export interface DemoSummary {
  /** The folder the demo shadowed (its real path). */
  folder: string;
  /** @deprecated folder's former name, kept for one release. */
  lower: string;
  mountPoint: string;
  agents: Record<string, AgentSummary>;
  /** Exit status of the project's tests in the folder itself (bundled example only). */
  testsInFolder?: number | null;
  switchMs: number[];
  folderUnchanged: boolean;
}

/** Picks two small files, in a stable order: one to edit, one to delete. */
function pickFiles(root: string): { edit: string; del: string } {
  const found: string[] = [];
  const walk = (rel: string): void => {
    if (found.length >= 2) return;
    const abs = path.join(root, rel);
    for (const ent of fs.readdirSync(abs, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      if (found.length >= 2) return;
      const r = rel ? `${rel}/${ent.name}` : ent.name;
      if (ent.isDirectory() && !['.git', 'node_modules'].includes(ent.name)) walk(r);
      else if (ent.isFile() && fs.statSync(path.join(root, r)).size < 256 * 1024) found.push(r);
    }
  };
  walk('');
  if (found.length < 2) throw new Error(`the demo needs a folder with at least two small files; ${root} has ${found.length}`);
  return { edit: found[0], del: found[1] };
}

function runTests(cwd: string): number | null {
  return spawnSync(process.execPath, ['--test'], { cwd, encoding: 'utf8', timeout: 120_000 }).status;
}

/** Each agent works through the mount with ordinary file calls, as any tool would. */
async function agentWork(shadow: Shadow, agent: string, work: (dir: string) => { edited: string[]; deleted: string[] }) {
  return shadow.withLayer(agent, async (dir) => work(dir));
}

export async function runDemo(folder: string | undefined, say: (line: string) => void): Promise<DemoSummary> {
  const bundled = folder === undefined;
  const realFolder = fs.realpathSync(folder ?? bundledExample);
  const before = fingerprintTree(realFolder);
  say(`Folder: ${realFolder} (${before.files} entries, fingerprint ${before.digest.slice(0, 12)})`);
  const shadow = await mount(realFolder, { layer: null });
  try {
    say(`Shadow mounted at ${shadow.mountPoint}: same tree, nothing copied.`);
    const agents: Record<string, AgentSummary> = {};
    const { edit, del } = bundled ? { edit: 'src/math.js', del: 'notes/todo.txt' } : pickFiles(realFolder);

    // Agent "alice" deletes a file (and, in the example, adds a passing test).
    const alice = await agentWork(shadow, 'alice', (dir) => {
      fs.unlinkSync(path.join(dir, del));
      if (bundled) {
        fs.writeFileSync(
          path.join(dir, 'test/mean-more.test.js'),
          "const test = require('node:test');\nconst assert = require('node:assert');\nconst { mean } = require('../src/math.js');\n\ntest('mean of one value', () => assert.strictEqual(mean([4]), 4));\n",
        );
        return { edited: ['test/mean-more.test.js'], deleted: [del] };
      }
      return { edited: [], deleted: [del] };
    });
    // Agent "bob" edits a file (in the example, in a way that breaks a test).
    const bob = await agentWork(shadow, 'bob', (dir) => {
      const f = path.join(dir, edit);
      const original = fs.readFileSync(f, 'utf8');
      const edited = bundled
        ? original.replace('return a + b;', 'return a - b; // bob broke this, in his layer only')
        : `${original}${original.endsWith('\n') || original === '' ? '' : '\n'}shadowfs demo: this line exists only in bob's layer\n`;
      fs.writeFileSync(f, edited);
      return { edited: [edit], deleted: [] };
    });
    for (const [name, work] of [
      ['alice', alice],
      ['bob', bob],
    ] as const) {
      agents[name] = { ...work, changes: await shadow.layer(name).changes() };
      say('');
      say(`Agent ${name} changed, in a layer of its own (in memory):`);
      for (const c of agents[name].changes) say(`  ${c.kind.padEnd(8)} ${c.path}`);
    }

    const switchMs: number[] = [];
    say('');
    say(`One shared mount, agents taking turns (${bundled ? 'node --test' : `looking at ${edit} and ${del}`}):`);
    if (bundled) {
      const inFolder = runTests(realFolder);
      say(`  your folder: tests ${inFolder === 0 ? 'pass' : `fail (exit ${inFolder})`}`);
      for (const name of ['alice', 'bob']) {
        const t0 = Date.now();
        agents[name].tests = await shadow.withLayer(name, async (dir) => {
          switchMs.push(Date.now() - t0);
          return runTests(dir);
        });
        const st = agents[name].tests;
        say(`  agent ${name.padEnd(5)}: tests ${st === 0 ? 'pass' : `fail (exit ${st}) - its own edit broke them`}`);
      }
      const summary = await finish(shadow, realFolder, before.digest, say);
      return {
        folder: realFolder,
        lower: realFolder,
        mountPoint: shadow.mountPoint,
        agents,
        testsInFolder: inFolder,
        switchMs,
        folderUnchanged: summary,
      };
    }
    for (const name of ['alice', 'bob']) {
      await shadow.withLayer(name, async (dir) => {
        const e = path.join(dir, edit);
        const lastLine = fs.readFileSync(e, 'utf8').trimEnd().split('\n').pop();
        say(
          `  agent ${name.padEnd(5)}: ${del} ${fs.existsSync(path.join(dir, del)) ? 'present' : 'deleted'}; last line of ${edit}: ${lastLine}`,
        );
      });
    }
    const unchanged = await finish(shadow, realFolder, before.digest, say);
    return { folder: realFolder, lower: realFolder, mountPoint: shadow.mountPoint, agents, switchMs, folderUnchanged: unchanged };
  } finally {
    if (shadow.mounted) await shadow.unmount({ lazy: true });
  }
}

async function finish(shadow: Shadow, folder: string, before: string, say: (line: string) => void): Promise<boolean> {
  await shadow.unmount();
  const after = fingerprintTree(folder).digest;
  const unchanged = after === before;
  say('');
  say(
    `Unmounted. Your folder's fingerprint is ${after.slice(0, 12)}: ${unchanged ? 'unchanged, not a byte written.' : 'CHANGED - this is a bug, please report it.'}`,
  );
  return unchanged;
}
