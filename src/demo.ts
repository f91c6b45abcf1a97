// The demo behind `shadowfs demo`: mounts a shadow, lets an "agent" edit one file and delete
// another inside it, runs the project's tests in both places when it is the bundled example,
// and proves the real folder did not change.
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { Change, mount } from './shadow';
import { fingerprintTree } from './tree';

export const bundledExample = path.join(__dirname, '..', '..', 'examples', 'demo-project');

export interface DemoSummary {
  lower: string;
  mountPoint: string;
  edited: string;
  deleted: string;
  changes: Change[];
  tests?: { inFolder: number | null; inShadow: number | null };
  folderUnchanged: boolean;
}

/** Picks a small text file to edit and another file to delete, in a stable order. */
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
  const r = spawnSync(process.execPath, ['--test'], { cwd, encoding: 'utf8', timeout: 120_000 });
  return r.status;
}

export async function runDemo(folder: string | undefined, say: (line: string) => void): Promise<DemoSummary> {
  const bundled = folder === undefined;
  const lower = fs.realpathSync(folder ?? bundledExample);
  const before = fingerprintTree(lower);
  say(`Folder: ${lower} (${before.files} entries, fingerprint ${before.digest.slice(0, 12)})`);
  const shadow = await mount(lower);
  try {
    say(`Shadow mounted at ${shadow.mountPoint}: same tree, nothing copied.`);
    const { edit, del } = bundled ? { edit: 'src/math.js', del: 'notes/todo.txt' } : pickFiles(lower);
    const inShadow = (rel: string): string => path.join(shadow.mountPoint, rel);

    // The "agent" works through the mount with ordinary file calls, as any tool would.
    const original = fs.readFileSync(inShadow(edit), 'utf8');
    const edited = bundled
      ? original.replace('return a + b;', 'return a - b; // an agent broke this, in the shadow only')
      : `${original}${original.endsWith('\n') || original === '' ? '' : '\n'}shadowfs demo: this line exists only in the shadow\n`;
    fs.writeFileSync(inShadow(edit), edited);
    fs.unlinkSync(inShadow(del));
    say('');
    say(`Inside the shadow, an agent edited ${edit} and deleted ${del}.`);
    const origLines = original.split('\n');
    edited.split('\n').forEach((line, i) => {
      if (line !== origLines[i]) say(`  ${edit}:${i + 1} in the shadow: ${line}`);
    });
    say(`  ${del} in the shadow: ${fs.existsSync(inShadow(del)) ? 'still there (unexpected!)' : 'gone'}`);
    say(`  ${del} in your folder: ${fs.existsSync(path.join(lower, del)) ? 'still there' : 'missing (unexpected!)'}`);

    let tests: DemoSummary['tests'];
    if (bundled) {
      say('');
      say('Running the project tests (node --test) in both places:');
      tests = { inFolder: runTests(lower), inShadow: runTests(shadow.mountPoint) };
      say(`  in your folder: ${tests.inFolder === 0 ? 'pass' : `fail (exit ${tests.inFolder})`}`);
      say(`  in the shadow:  ${tests.inShadow === 0 ? 'pass' : `fail (exit ${tests.inShadow}), because of the agent's edit`}`);
    }

    const changes = await shadow.changes();
    say('');
    say('Changes held in the shadow layer (in memory):');
    for (const c of changes) say(`  ${c.kind.padEnd(8)} ${c.path}`);

    await shadow.unmount();
    const after = fingerprintTree(lower);
    const folderUnchanged = after.digest === before.digest;
    say('');
    say(
      `Unmounted. Your folder's fingerprint is ${after.digest.slice(0, 12)}: ${folderUnchanged ? 'unchanged, not a byte written.' : 'CHANGED - this is a bug, please report it.'}`,
    );
    return { lower, mountPoint: shadow.mountPoint, edited: edit, deleted: del, changes, tests, folderUnchanged };
  } finally {
    if (shadow.mounted) await shadow.unmount({ lazy: true });
  }
}
