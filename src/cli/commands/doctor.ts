// `shadowfs doctor`: checks what shadowfs needs on this machine and says what to do about it.
import { execFileSync } from 'child_process';
import type { Argv, CommandModule } from 'yargs';
import { ShadowClient } from '../../client/client';
import { nativeModule, type WinFspStatus } from '../../shadow/native';
import { platform, winfspInstallDir } from '../../platform';
import { type DoctorCheck, win32DoctorChecks } from '../../platform/win32-doctor';
import { probeFuseDevice, probeInotify, probeKernel, ProbeResult } from '../../platform/probe';
import { emit, ExitCode } from '../output';

interface Args {
  json: boolean;
}

interface Check extends ProbeResult {
  name: string;
  required: boolean;
  /** The facts of `detail` as values (Windows checks). */
  facts?: DoctorCheck['facts'];
}

export const doctorCommand: CommandModule<object, Args> = {
  command: 'doctor',
  describe:
    'Check the FUSE device, fusermount3, the kernel (on Windows: WinFsp and its version, whether runs can be protected, antivirus and Dev Drive advice), the native module and the daemon',
  builder: (y: Argv) => y.option('json', { type: 'boolean', default: false }) as Argv<Args>,
  handler: async (args) => {
    const checks: Check[] = [];
    const add = (name: string, required: boolean, r: ProbeResult): void => void checks.push({ name, required, ...r });
    // The daemon first: on Windows its shadows name the mount points and folders the advice is about.
    let daemon: { pid: number; socket: string; shadows: Array<{ folder: string; mountPoint: string }> } | undefined;
    try {
      const c = await ShadowClient.connect({ autostart: false });
      daemon = await c.request('status');
      c.close();
    } catch {
      daemon = undefined;
    }
    if (platform.name === 'win32') {
      // The module's own look (registry, then the DLL by full path, then its entry points) when
      // it loads; the registry alone (and the DLL's version read with version.dll) otherwise.
      let w: WinFspStatus | null = null;
      try {
        w = nativeModule().winfsp();
      } catch {
        w = null;
      }
      const shadows = daemon?.shadows ?? [];
      checks.push(
        ...(await win32DoctorChecks({
          module: w,
          installDir: winfspInstallDir(),
          mountPoints: shadows.map((s) => s.mountPoint),
          folders: shadows.length ? shadows.map((s) => s.folder) : [process.cwd()],
        })),
      );
    } else {
      add('fuse-device', true, probeFuseDevice());
      try {
        const v = execFileSync('fusermount3', ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
        add('fusermount3', process.getuid?.() !== 0, { ok: true, detail: v });
      } catch {
        add('fusermount3', process.getuid?.() !== 0, {
          ok: false,
          detail: 'fusermount3 not found: install the fuse3 package (needed when not running as root)',
        });
      }
      add('kernel', false, probeKernel());
      add('inotify', false, probeInotify());
    }
    try {
      // The module itself (on Windows it loads without WinFsp; the winfsp check says the rest).
      add('native-module', true, { ok: true, detail: `backends: ${nativeModule().backends.join(', ')}` });
    } catch (err) {
      add('native-module', true, { ok: false, detail: (err as Error).message });
    }
    add(
      'daemon',
      false,
      daemon
        ? { ok: true, detail: `running (pid ${daemon.pid}) at ${daemon.socket}` }
        : { ok: true, detail: 'not running (any command starts it)' },
    );
    const healthy = checks.every((c) => c.ok || !c.required);
    emit(
      args,
      { healthy, checks },
      checks.map((c) => `${c.ok ? 'ok  ' : c.required ? 'FAIL' : 'warn'} ${c.name.padEnd(14)} ${c.detail}`).join('\n'),
    );
    if (!healthy) process.exitCode = ExitCode.FAILURE;
  },
};
