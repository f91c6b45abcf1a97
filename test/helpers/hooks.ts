// Root hooks: the integration tests need a usable /dev/fuse and fail loudly without it (never
// skip); mounts leaked by an earlier, killed run are removed first so they cannot break this one.
import * as fs from 'fs';
import { execFileSync } from 'child_process';
import { leakedTestMounts, removeTempDirs } from './fixtures';

export const mochaHooks = {
  beforeAll(): void {
    try {
      fs.accessSync('/dev/fuse', fs.constants.R_OK | fs.constants.W_OK);
    } catch {
      throw new Error(
        '/dev/fuse is missing or not usable: the shadowfs integration tests mount real FUSE file systems. ' +
          'Load the fuse module (modprobe fuse) or give the container the device (--device /dev/fuse --cap-add SYS_ADMIN).',
      );
    }
    for (const mp of leakedTestMounts()) {
      try {
        execFileSync('umount', ['-l', mp], { stdio: 'ignore' });
      } catch {
        execFileSync('fusermount3', ['-uz', mp], { stdio: 'ignore' });
      }
    }
  },
  afterAll(): void {
    const leaked = leakedTestMounts();
    removeTempDirs();
    if (leaked.length > 0) throw new Error(`tests leaked mounts: ${leaked.join(', ')}`);
  },
};
