// Links the Windows tests plant, on Windows and under wine. Wine (8.0) has no reparse points: it
// cannot make a junction or a Windows symbolic link, and it shows a Unix symbolic link as the
// object it points to. So under wine a planted link is a Unix symbolic link made by Linux's own
// ln (through `start /unix`), which wine follows silently; on Windows it is a junction (a
// directory target, no privilege needed) or a file symbolic link.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';

/** The Unix path of a path under Z:, wine's view of the Linux root. */
export function unixPath(p: string): string {
  assert.match(p, /^Z:\\/i, `${p} is not on wine's Z: drive`);
  return p.slice(2).replace(/\\/g, '/');
}

/** Plants at `at` a link to the directory or file `target` (see the top of this file); returns its kind. */
export function plantLink(at: string, target: string, wine: boolean): string {
  if (wine) {
    const r = spawnSync('cmd.exe', ['/c', 'start', '/wait', '/unix', '/bin/ln', '-s', unixPath(target), unixPath(at)], {
      stdio: 'ignore',
    });
    assert.strictEqual(r.status, 0, `could not make a Unix symbolic link at ${at}`);
    // `start /wait` does not wait for a Unix program: wait until the link shows.
    const deadline = Date.now() + 5000;
    while (!fs.existsSync(at) && Date.now() < deadline) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
    assert.ok(fs.existsSync(at), `the Unix symbolic link at ${at} does not show under wine`);
    return 'a Unix symbolic link (wine)';
  }
  if (fs.statSync(target).isDirectory()) {
    fs.symlinkSync(target, at, 'junction');
    assert.ok(fs.lstatSync(at).isSymbolicLink(), `${at} is not a reparse point`);
    return 'a junction';
  }
  fs.symlinkSync(target, at, 'file'); // needs the privilege or developer mode; the test says so if it fails
  return 'a file symbolic link';
}

/** Removes the tree `base` that holds planted links, never what they point to. */
export function removePlanted(base: string, wine: boolean): void {
  // Under wine, Node's rm would see a Unix link as the directory it points to and empty that:
  // let Linux remove it.
  if (wine) spawnSync('cmd.exe', ['/c', 'start', '/wait', '/unix', '/bin/rm', '-rf', unixPath(base)], { stdio: 'ignore' });
  else fs.rmSync(base, { recursive: true, force: true });
}
