// Fingerprint of a directory tree (names, types, modes, sizes, mtimes, contents, link
// targets), used to prove that the user's folder was not written.
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';

export interface TreeFingerprint {
  digest: string;
  files: number;
}

export function fingerprintTree(root: string): TreeFingerprint {
  const h = crypto.createHash('sha256');
  let files = 0;
  const walk = (rel: string): void => {
    const abs = rel ? path.join(root, rel) : root;
    const st = fs.lstatSync(abs, { bigint: true });
    h.update(`${rel}\0${st.mode}\0${st.size}\0${st.mtimeNs}\0${st.uid}:${st.gid}\0`);
    files++;
    if (st.isSymbolicLink()) {
      h.update(fs.readlinkSync(abs));
    } else if (st.isFile()) {
      h.update(fs.readFileSync(abs));
    } else if (st.isDirectory()) {
      for (const name of fs.readdirSync(abs).sort()) walk(rel ? `${rel}/${name}` : name);
    }
    h.update('\n');
  };
  walk('');
  return { digest: h.digest('hex'), files };
}
