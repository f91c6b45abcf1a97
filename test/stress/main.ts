// npm run stress [-- --seconds S]: stress-ng file-system stressors and fio with data
// verification, each in an agent view of one shadow, while the shared mount of the same shadow
// switches between two other layers as fast as it can and reader processes check that every
// read returns one layer's whole content. Passes when every tool exits cleanly, no read is
// mixed, no mount is left behind and the folder's fingerprint is unchanged. Needs root.
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { mount } from '../../src';
import { mountedPaths } from '../../src/platform';
import { fingerprintTree } from '../../src/common/fingerprint';

const secondsArg = process.argv.indexOf('--seconds');
const SECONDS = secondsArg >= 0 ? Number(process.argv[secondsArg + 1]) : 20;

function run(cmd: string, args: string[], opts: { cwd?: string } = {}): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', (code) => resolve({ code, out }));
  });
}

async function main(): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-stress-'));
  const lower = path.join(work, 'lower');
  fs.cpSync(path.join(__dirname, '..', '..', '..', 'examples', 'demo-project'), lower, { recursive: true });
  const before = fingerprintTree(lower).digest;
  const results: Array<[string, boolean, string]> = [];
  const shadow = await mount(lower, { mountPoint: path.join(work, 'mnt') });
  const files = Array.from({ length: 8 }, (_, i) => `hot/f${i}.txt`);
  const content = (agent: string, i: number): string => agent.repeat(2000 + (agent === 'x' ? 0 : 1111) + i);
  for (const a of ['x', 'y']) for (let i = 0; i < files.length; i++) await shadow.layer(a).write(files[i], content(a, i));
  await shadow.activate('x');
  const sng = await shadow.openView('sng', { mountPoint: path.join(work, 'sng') });
  const fio = await shadow.openView('fio', { mountPoint: path.join(work, 'fio') });
  fs.mkdirSync(path.join(fio.mountPoint, 'fio'));
  const reader = `
    const fs = require('fs'); const files = ${JSON.stringify(files)}; const mp = ${JSON.stringify(shadow.mountPoint)};
    const end = Date.now() + ${SECONDS * 1000}; let n = 0;
    while (Date.now() < end) for (let i = 0; i < files.length; i++) {
      const s = fs.readFileSync(mp + '/' + files[i], 'utf8'); const want = 2000 + (s[0] === 'x' ? 0 : 1111) + i;
      if ((s[0] !== 'x' && s[0] !== 'y') || s.length !== want || s !== s[0].repeat(want)) { console.log('MIXED ' + files[i] + ' ' + s.length); process.exit(1); }
      n++;
    }
    console.log('reads ' + n);`;
  let switches = 0;
  let switching = true;
  const switcher = (async () => {
    while (switching) {
      await shadow.activate(switches % 2 ? 'x' : 'y');
      switches++;
      await new Promise((r) => setImmediate(r));
    }
  })();
  try {
    const jobs = await Promise.all([
      run(
        'stress-ng',
        [
          '--dir',
          '1',
          '--rename',
          '1',
          '--link',
          '1',
          '--symlink',
          '1',
          '--hdd',
          '1',
          '--hdd-bytes',
          '16M',
          '--verify',
          '--timeout',
          `${SECONDS}s`,
          '--temp-path',
          sng.mountPoint,
        ],
        { cwd: work },
      ),
      run(
        'fio',
        [
          '--name=verify',
          `--directory=${fio.mountPoint}/fio`,
          '--rw=randwrite',
          '--bs=4k',
          '--size=32M',
          '--verify=crc32c',
          '--do_verify=1',
          // fio would otherwise leave local-verify-*.state files in the working directory.
          '--verify_state_save=0',
          '--numjobs=2',
          '--ioengine=psync',
          `--loops=${Math.max(1, Math.round(SECONDS / 5))}`,
        ],
        // In the scratch directory, so that no state file it might still write lands in the checkout.
        { cwd: work },
      ),
      run(process.execPath, ['-e', reader]),
      run(process.execPath, ['-e', reader]),
    ]);
    switching = false;
    await switcher;
    results.push([
      'stress-ng dir, rename, link, symlink, hdd --verify in a view',
      jobs[0].code === 0,
      jobs[0].out
        .split('\n')
        .filter((l) => /fail|error|successful/i.test(l))
        .join('; '),
    ]);
    const fioErrors = jobs[1].out.match(/err= *(\d+)/g) ?? [];
    results.push([
      'fio randwrite with crc32c verification in a view',
      jobs[1].code === 0 && fioErrors.every((e) => /err= *0$/.test(e)),
      fioErrors.join(' ') || jobs[1].out.slice(-300),
    ]);
    for (const r of jobs.slice(2)) results.push([`reader during ${switches} layer switches`, r.code === 0, r.out.trim()]);
  } finally {
    switching = false;
    await switcher;
    await sng.close({ lazy: true });
    await fio.close({ lazy: true });
    await shadow.unmount({ lazy: true });
  }
  results.push(['no mount left behind', ![...mountedPaths()].some((m) => m.startsWith(work)), '']);
  results.push(["the folder's fingerprint is unchanged", fingerprintTree(lower).digest === before, '']);
  fs.rmSync(work, { recursive: true, force: true });
  for (const [name, ok, detail] of results) process.stdout.write(`${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? ` (${detail})` : ''}\n`);
  const failed = results.filter((r) => !r[1]).length;
  process.stdout.write(`${results.length - failed} passed, ${failed} failed\n`);
  process.exit(failed ? 1 : 0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
