// What a process would hand on to a program it starts (Linux): its descriptors above 2 without
// close-on-exec, read from /proc/<pid>/fdinfo (the "flags:" line, octal, O_CLOEXEC = 02000000).
// Written apart from src/platform/linux-fds.ts so that a test does not check that module by itself.
import * as fs from 'fs';

export function inheritableFdsOf(pid: number | 'self'): Array<{ fd: number; target: string }> {
  const out: Array<{ fd: number; target: string }> = [];
  for (const name of fs.readdirSync(`/proc/${pid}/fd`)) {
    const fd = Number(name);
    if (fd <= 2) continue;
    let info: string;
    let target: string;
    try {
      info = fs.readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8');
      target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue;
    }
    const m = info.match(/^flags:\s+(\d+)/m);
    if (!m) throw new Error(`/proc/${pid}/fdinfo/${fd} has no flags line: ${info}`);
    if ((parseInt(m[1], 8) & 0o2000000) === 0) out.push({ fd, target });
  }
  return out;
}
