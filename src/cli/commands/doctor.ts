// `shadowfs doctor`: checks what shadowfs needs on this machine and says what to do about it.
import { execFileSync } from 'child_process';
import type { Argv, CommandModule } from 'yargs';
import { ShadowClient } from '../../client';
import { nativeModule, type WinFspStatus } from '../../native';
import { platform, winfspInstallDir } from '../../platform';
import { probeFuseDevice, probeInotify, probeKernel, ProbeResult } from '../../probe';
import { emit, ExitCode } from '../output';

interface Args {
  json: boolean;
}

interface Check extends ProbeResult {
  name: string;
  required: boolean;
}

export const doctorCommand: CommandModule<object, Args> = {
  command: 'doctor',
  describe: 'Check the FUSE device (WinFsp on Windows), fusermount3, the kernel, the native module and the daemon',
  builder: (y: Argv) => y.option('json', { type: 'boolean', default: false }) as Argv<Args>,
  handler: async (args) => {
    const checks: Check[] = [];
    const add = (name: string, required: boolean, r: ProbeResult): void => void checks.push({ name, required, ...r });
    if (platform.name === 'win32') {
      // The module's own look (registry, then the DLL by full path, then its entry points) when
      // it loads; the registry alone otherwise.
      let w: WinFspStatus | null = null;
      try {
        w = nativeModule().winfsp();
      } catch {
        w = null;
      }
      const dir = winfspInstallDir();
      add(
        'winfsp',
        true,
        w
          ? w.available
            ? {
                ok: true,
                detail: `${w.dll}${w.version ? ` (version ${w.version})` : ' (no version resource)'} loaded; FUSE3 entry points found: ${w.resolved.length}`,
              }
            : { ok: false, detail: w.error }
          : dir
            ? { ok: true, detail: `installed in ${dir}` }
            : { ok: false, detail: 'WinFsp is not installed: install WinFsp 2.x from https://winfsp.dev/rel/' },
      );
      add('antivirus', false, {
        ok: true,
        detail:
          'real-time scanning of the mount points (under %LOCALAPPDATA%\\shadowfs\\mounts) scans every file a build reads twice; exclude that folder if builds in a shadow are slow',
      });
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
    try {
      const c = await ShadowClient.connect({ autostart: false });
      const st = await c.request('status');
      c.close();
      add('daemon', false, { ok: true, detail: `running (pid ${st.pid}) at ${st.socket}` });
    } catch {
      add('daemon', false, { ok: true, detail: 'not running (any command starts it)' });
    }
    const healthy = checks.every((c) => c.ok || !c.required);
    emit(
      args,
      { healthy, checks },
      checks.map((c) => `${c.ok ? 'ok  ' : c.required ? 'FAIL' : 'warn'} ${c.name.padEnd(14)} ${c.detail}`).join('\n'),
    );
    if (!healthy) process.exitCode = ExitCode.FAILURE;
  },
};
