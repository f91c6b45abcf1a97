// `shadowfs mount <folder> [--at DIR] [--backend B] [--foreground] [--json]`: through the
// daemon, or with --foreground in this process until SIGINT/SIGTERM, then unmount cleanly.
import type { Argv, CommandModule } from 'yargs';
import * as path from 'path';
import { ShadowError } from '../../common/errors';
import { withClient } from '../daemon-call';
import type { IoMode } from '../../shadow';
import { emit, reportError } from '../output';

interface Args {
  folder: string;
  at?: string;
  name?: string;
  foreground: boolean;
  json: boolean;
  'cache-timeout': number;
  backend?: string;
  io?: string;
  'allow-other': boolean;
  'writable-git': boolean;
}

export const mountCommand: CommandModule<object, Args> = {
  command: 'mount <folder>',
  describe: 'Mount a shadow of <folder>: reads pass through live, writes stay in memory',
  builder: (y: Argv) =>
    y
      .positional('folder', { type: 'string', demandOption: true, describe: 'the folder to shadow (never written)' })
      .option('at', {
        type: 'string',
        describe: 'mount point (created if missing, must be empty); default: a new directory under the runtime directory',
      })
      .option('name', { type: 'string', describe: 'name of the shadow in the daemon (default: the folder name)' })
      .option('foreground', { type: 'boolean', default: false, describe: 'mount in this process (no daemon) until Ctrl-C / SIGTERM' })
      .option('cache-timeout', {
        type: 'number',
        default: 60,
        describe: 'seconds the kernel may cache names and attributes (edits in the folder are pushed at once through inotify)',
      })
      .option('backend', {
        type: 'string',
        describe:
          'mount backend: fuse_ll (Linux, fastest) or fuse_hl (the portable FUSE3 backend Windows uses); default $SHADOWFS_BACKEND, else fuse_ll',
      })
      .option('io', {
        type: 'string',
        choices: ['cached', 'open', 'passthrough'],
        describe:
          'how fuse_ll serves opens: cached (no open round trips), open (one per open file), passthrough (reads of the ' +
          "folder's files go straight to them; root, Linux 6.9+); default $SHADOWFS_IO, else cached",
      })
      .option('allow-other', {
        type: 'boolean',
        default: false,
        describe:
          'let other users use the shadow, the kernel checking permissions (FUSE allow_other; a user other than root needs ' +
          'user_allow_other in /etc/fuse.conf); give --at a place they can reach',
      })
      .option('writable-git', {
        type: 'boolean',
        default: false,
        describe:
          "let layers write git's control files (.git itself, a repository's config and hooks, the folder's core.hooksPath): " +
          'by default they cannot, since git you run in the mount would obey them; with this, run git there only in `shadowfs shell`',
      })
      .option('json', { type: 'boolean', default: false, describe: 'print one JSON object per event' }) as Argv<Args>,
  handler: async (args) => {
    if (!args.foreground) {
      // The daemon's working directory is not ours: send absolute paths.
      return withClient(
        args,
        (c) =>
          c.request('mount', {
            folder: path.resolve(args.folder),
            ...(args.at ? { mountPoint: path.resolve(args.at) } : {}),
            ...(args.name ? { name: args.name } : {}),
            cacheTimeout: args['cache-timeout'],
            ...(args.backend ? { backend: args.backend } : {}),
            ...(args.io ? { io: args.io as IoMode } : {}),
            ...(args['allow-other'] ? { allowOther: true } : {}),
            ...(args['writable-git'] ? { protectGit: false } : {}),
          }),
        (r) => `${r.name}\t${r.mountPoint}`,
      );
    }
    let keepAlive: NodeJS.Timeout | undefined;
    try {
      // A mount in this process (--foreground): its code and winston are loaded only then (a
      // failure to load is reported as any other error).
      /* eslint-disable @typescript-eslint/no-require-imports */
      const { createLogger } = require('../../common/log') as typeof import('../../common/log');
      const { mount } = require('../../shadow') as typeof import('../../shadow');
      /* eslint-enable @typescript-eslint/no-require-imports */
      const log = createLogger();
      // Listen before anything is printed: a caller may signal as soon as it reads "mounted".
      const signalled = new Promise<NodeJS.Signals>((resolve) => {
        process.once('SIGINT', () => resolve('SIGINT'));
        process.once('SIGTERM', () => resolve('SIGTERM'));
      });
      keepAlive = setInterval(() => undefined, 1 << 30);
      const shadow = await mount(args.folder, {
        mountPoint: args.at,
        cacheTimeout: args['cache-timeout'],
        backend: args.backend,
        ...(args.io ? { io: args.io as IoMode } : {}),
        allowOther: args['allow-other'],
        protectGit: !args['writable-git'],
      });
      emit(
        args,
        // lower: folder's former name, kept for one protocol version (as in list and status).
        { event: 'mounted', mountPoint: shadow.mountPoint, folder: shadow.folder, lower: shadow.folder, backend: shadow.backend },
        `Mounted a shadow of ${shadow.folder} at ${shadow.mountPoint}. Press Ctrl-C to unmount.`,
      );
      const signal = await signalled;
      try {
        await shadow.unmount();
      } catch (err) {
        if (!(err instanceof ShadowError) || err.code !== 'MOUNT_BUSY') throw err;
        log.warn(`${err.message}; detaching it lazily because this process is exiting`);
        await shadow.unmount({ lazy: true });
      }
      emit(args, { event: 'unmounted', mountPoint: shadow.mountPoint, signal }, `Unmounted ${shadow.mountPoint}.`);
    } catch (err) {
      reportError(args, err);
    } finally {
      clearInterval(keepAlive);
    }
  },
};
