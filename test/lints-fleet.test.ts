// Many agents asking the lints service at once, each with its own one-line error in the same
// file or in another: every answer is fresh and holds exactly that agent's error, never another
// agent's, whether the questions are answered in batches on the folder (the default) or one at a
// time with each agent's layer on the mount, on one warm server or (by default, for a burst) two.
// Agents changing two files that import each other get answers from their own text of both. The folder is guarded throughout (withShadow).
import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { LintsService } from '../src/lints/service';
import { eventually, tempDir, withShadow } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';

const A_TS = 'export function add(a: number, b: number): number {\n  return a + b;\n}\n';
const B_TS = "import { add } from './a';\n\nexport const three = add(1, 2);\n";

function makeProject(): string {
  const dir = tempDir('lints-fleet');
  fs.mkdirSync(path.join(dir, 'src'));
  fs.writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { strict: true, target: 'ES2022', module: 'commonjs', noEmit: true }, include: ['src'] }),
  );
  fs.writeFileSync(path.join(dir, 'src', 'a.ts'), A_TS);
  fs.writeFileSync(path.join(dir, 'src', 'b.ts'), B_TS);
  return dir;
}

const AGENTS = 20;

describe('lints: many agents asking at once', function () {
  this.timeout(300_000);
  after(() => stopTestDaemon());

  for (const batch of [true, false]) {
    it(`${AGENTS} agents, each with its own error, each get exactly their own, fresh (${batch ? 'batched on the folder' : 'one at a time, each layer on the mount'})`, async () => {
      await withShadow(makeProject(), async (shadow) => {
        const svc = new LintsService(shadow, { batch, servers: 2 });
        try {
          // Warm the server and the baselines of both files first, as a busy shadow would have them.
          await svc.lints({ shadow: 'fleet', agent: 'warm', paths: ['src/a.ts', 'src/b.ts'], timeoutMs: 120_000 });
          const names = Array.from({ length: AGENTS }, (_, i) => `missing_${i}`);
          const ask = async (name: string, i: number) => {
            const agent = `agent${i}`;
            // Even agents break a.ts, odd ones b.ts: one line naming what no one defines.
            const file = i % 2 ? 'src/b.ts' : 'src/a.ts';
            // An a.ts agent also renames add: a b.ts agent checked against its a.ts would break.
            const base = i % 2 ? B_TS : A_TS.replace('add', `add${i}`);
            const r = await svc.lints({
              shadow: 'fleet',
              agent,
              edits: [{ path: file, content: `${base}export const probe_${i}: number = ${name};\n` }],
              timeoutMs: 120_000,
            });
            return { agent, name, r };
          };
          // More agents in the same crowd, between the others: some rename add in a.ts and follow
          // it in b.ts (clean only if b.ts is checked against their own a.ts, and an agent after
          // them sees its own a.ts again, not theirs), some rename it in a.ts alone and ask about
          // b.ts (which then breaks, only if checked against their a.ts).
          const bothAsk = (k: number) =>
            svc.lints({
              shadow: 'fleet',
              agent: `both${k}`,
              edits: [
                { path: 'src/a.ts', content: A_TS.replace('add', `plus${k}`) },
                { path: 'src/b.ts', content: B_TS.replace(/add/g, `plus${k}`) },
              ],
              timeoutMs: 120_000,
            });
          const halfAsk = async (k: number) => {
            await shadow.layer(`half${k}`).write('src/a.ts', A_TS.replace('add', `sum${k}`));
            return svc.lints({ shadow: 'fleet', agent: `half${k}`, paths: ['src/b.ts'], timeoutMs: 120_000 });
          };
          // All at once, the renaming agents spread among the others.
          const asks: Array<ReturnType<typeof ask>> = [];
          const both: Array<ReturnType<typeof bothAsk>> = [];
          const half: Array<ReturnType<typeof halfAsk>> = [];
          names.forEach((name, i) => {
            asks.push(ask(name, i));
            if (i % 4 === 1) both.push(bothAsk(both.length));
            if (i % 7 === 3) half.push(halfAsk(half.length));
          });
          const answers = await Promise.all(asks);
          for (const { agent, name, r } of answers) {
            assert.strictEqual(r.files.length, 1, agent);
            const f = r.files[0];
            assert.strictEqual(f.status, 'fresh', `${agent}: ${JSON.stringify(f)}`);
            assert.strictEqual(f.baseline, 'cached', agent);
            const messages = f.introduced.map((d) => d.message);
            assert.strictEqual(messages.length, 1, `${agent}: ${JSON.stringify(messages)}`);
            assert.ok(messages[0].includes(`'${name}'`), `${agent}: ${messages[0]}`);
            const all = JSON.stringify(f);
            for (const other of names) if (other !== name) assert.ok(!all.includes(`'${other}'`), `${agent} sees ${other}: ${all}`);
          }
          for (const b of await Promise.all(both))
            assert.deepStrictEqual(
              b.files.map((f) => [f.path, f.status, f.introduced.length]),
              [
                ['src/a.ts', 'fresh', 0],
                ['src/b.ts', 'fresh', 0],
              ],
              JSON.stringify(b),
            );
          for (const h of await Promise.all(half)) {
            assert.strictEqual(h.files[0].status, 'fresh', JSON.stringify(h));
            assert.ok(
              h.files[0].introduced.some((d) => d.message.includes("'add'")),
              `b.ts checked against the agent's own a.ts: ${JSON.stringify(h)}`,
            );
          }
          // Batched questions never took a job with the agent's layer on the mount; the old way did, one each.
          const jobs = shadow.schedulerStats().agents;
          for (let i = 0; i < AGENTS; i++) assert.strictEqual(jobs[`agent${i}`]?.runs ?? 0, batch ? 0 : 1, `agent${i}`);
          // What the mount shows afterwards is the folder's or the last layer's, never a mix: the
          // next question of one agent still sees only its own error.
          const again = await svc.lints({ shadow: 'fleet', agent: 'agent3', paths: ['src/b.ts'], timeoutMs: 120_000 });
          assert.deepStrictEqual(
            again.files[0].introduced.map((d) => d.message.includes("'missing_3'")),
            [true],
          );
        } finally {
          await svc.dispose();
        }
      });
    });
  }

  it('by default a burst of questions is answered by two warm servers (one per core), each agent still getting exactly its own error', async () => {
    const saved = { servers: process.env.SHADOWFS_LINTS_SERVERS, one: process.env.SHADOWFS_LINTS_ONE_AT_A_TIME };
    delete process.env.SHADOWFS_LINTS_SERVERS;
    delete process.env.SHADOWFS_LINTS_ONE_AT_A_TIME;
    try {
      await withShadow(makeProject(), async (shadow) => {
        const svc = new LintsService(shadow);
        try {
          await svc.lints({ shadow: 'fleet', agent: 'warm', paths: ['src/a.ts'], timeoutMs: 120_000 });
          assert.strictEqual(svc.runningServers().filter((x) => x.id === 'typescript').length, 1, 'one question, one server');
          // A further server needs a core and 1 GiB of free memory (Batches).
          const expected = os.availableParallelism() >= 2 && os.freemem() > 1024 * 1024 * 1024 ? 2 : 1;
          const answers = await Promise.all(
            Array.from({ length: 8 }, (_, i) =>
              svc.lints({
                shadow: 'fleet',
                agent: `agent${i}`,
                edits: [{ path: 'src/a.ts', content: `${A_TS}export const probe_${i}: number = missing_${i};\n` }],
                timeoutMs: 120_000,
              }),
            ),
          );
          answers.forEach((r, i) => {
            const f = r.files[0];
            assert.strictEqual(f.status, 'fresh', JSON.stringify(f));
            assert.deepStrictEqual(
              f.introduced.map((d) => d.message.includes(`'missing_${i}'`)),
              [true],
              `agent${i}: ${JSON.stringify(f.introduced)}`,
            );
          });
          assert.strictEqual(svc.runningServers().filter((x) => x.id === 'typescript').length, expected);
          for (let i = 0; i < 8; i++)
            assert.strictEqual(shadow.schedulerStats().agents[`agent${i}`]?.runs ?? 0, 0, `agent${i} was batched`);
        } finally {
          await svc.dispose();
        }
      });
    } finally {
      for (const [k, v] of [
        ['SHADOWFS_LINTS_SERVERS', saved.servers],
        ['SHADOWFS_LINTS_ONE_AT_A_TIME', saved.one],
      ] as const)
        if (v !== undefined) process.env[k] = v;
    }
  });

  it("a batch never holds the shared mount past its callers' deadline: a server that hangs on its restart gives timeout, and the mount is free for the next agent at once", async () => {
    const lower = makeProject();
    // A server for .txt files that works until the marker exists, then hangs on its next start
    // (not even initialize is answered). The marker sits in .git, whose edits the service ignores,
    // so the folder's cached baseline stays and the agents' questions go straight to a batch. The
    // server looks for it relative to its directory, the shadow (a confined server sees the
    // folder's node_modules, not the folder itself).
    fs.mkdirSync(path.join(lower, '.git'));
    fs.mkdirSync(path.join(lower, '.shadowfs'));
    const marker = path.join(lower, '.git', 'hang-now');
    const server = path.join(__dirname, 'fixtures', 'lsp', 'second-start-hangs-server.js');
    fs.writeFileSync(
      path.join(lower, '.shadowfs', 'lsp.json'),
      JSON.stringify({
        servers: [
          {
            id: 'wedge',
            command: process.execPath,
            args: [server, '.git/hang-now'],
            languages: [{ languageId: 'plaintext', extensions: ['.txt'] }],
          },
        ],
      }),
    );
    fs.writeFileSync(path.join(lower, 'notes.txt'), 'hello\n');
    await withShadow(
      lower,
      async (shadow) => {
        const svc = new LintsService(shadow, { batch: true });
        try {
          const warm = await svc.lints({
            shadow: 'fleet',
            agent: 'warm',
            edits: [{ path: 'notes.txt', content: 'warm\n' }],
            timeoutMs: 60_000,
          });
          assert.deepStrictEqual([warm.files[0].status, warm.files[0].baseline], ['fresh', 'fresh'], JSON.stringify(warm));
          // Wedge it: the server is killed and the one started in its place never answers.
          fs.writeFileSync(marker, 'x');
          const [wedge] = svc.runningServers().filter((x) => x.id === 'wedge');
          process.kill(wedge.pid, 'SIGKILL');
          await eventually(() => !svc.runningServers().some((x) => x.pid === wedge.pid), 20_000, 'the service to see its server gone');
          const answers = await Promise.all(
            [0, 1, 2].map((i) =>
              svc.lints({
                shadow: 'fleet',
                agent: `w${i}`,
                edits: [{ path: 'notes.txt', content: `mine ${i}\n` }],
                timeoutMs: 1500 + 500 * i,
              }),
            ),
          );
          for (const r of answers) {
            assert.strictEqual(r.files[0].status, 'timeout', JSON.stringify(r.files[0]));
            assert.deepStrictEqual(r.files[0].introduced, []);
          }
          // None of them took a job with its layer on the mount: they were batched.
          for (const i of [0, 1, 2]) assert.strictEqual(shadow.schedulerStats().agents[`w${i}`]?.runs ?? 0, 0, `w${i}`);
          // The server's start gives up only after 60 s; the batch let go of the mount at its callers' deadline.
          await eventually(() => shadow.schedulerStats().running === null, 15_000, 'the batch to release the shared mount');
          assert.strictEqual(await shadow.withLayer('next', async () => 'ran', { timeout: 15_000 }), 'ran');
        } finally {
          await svc.dispose();
        }
        // Unguarded: the test itself writes the marker into the folder's .git.
      },
      { guard: false },
    );
  });
});
