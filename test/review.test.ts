// Per-hunk review (#32) on real mounts: an agent's changes, made through the mount, listed as
// hunks with stable ids; some of them applied to the folder while the layer keeps the rest as its
// change relative to the new folder text (and the rest applies later without a conflict); the
// folder changed meanwhile (a conflict, resolved by writing the chosen hunks onto the folder's
// own text); rejections recorded, persisted, reverted on request. The daemon, CLI and MCP faces
// are in review-cli.test.ts.
import * as assert from 'assert';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { reviewUnits, withChosen } from '../src/patch/review';
import { withWork } from './helpers/fixtures';
import { agentNotes, LINES, makeReviewRepo } from './helpers/review-repo';

const read = (p: string): string => fs.readFileSync(p, 'utf8');

describe('review: hunks with stable ids, and applying some of them', function () {
  this.timeout(60_000);

  it('a subset applied writes the folder base + those hunks; the layer keeps the rest, whose ids stay and which apply later without conflict', async () => {
    const repo = makeReviewRepo();
    await withWork(
      repo,
      async (w, shadow, mp) => {
        await shadow.createLayer('a');
        await shadow.activate('a');
        fs.writeFileSync(path.join(mp, 'notes.txt'), agentNotes());
        fs.writeFileSync(path.join(mp, 'image.bin'), Buffer.from([0, 9, 9]));
        fs.writeFileSync(path.join(mp, 'added.txt'), 'new file\n');
        fs.chmodSync(path.join(mp, 'run.sh'), 0o755);
        fs.writeFileSync(path.join(mp, 'run.sh'), '#!/bin/sh\necho two\n');
        const first = await w.hunks('a');
        const again = await w.hunks('a');
        assert.deepStrictEqual(
          again.hunks.map((h) => h.id),
          first.hunks.map((h) => h.id),
          'ids are the same on a second listing',
        );
        const notes = first.hunks.filter((h) => h.path === 'notes.txt');
        assert.deepStrictEqual(
          notes.map((h) => [h.unit, h.oldStart, h.newStart]),
          [
            ['hunk', 2, 2],
            ['hunk', 37, 37],
            ['hunk', 48, 48],
          ],
        );
        assert.match(notes[0].text, /^@@ -2,7 \+2,7 @@\n line 2\n/);
        assert.match(notes[0].text, /\n-line 5\n\+line 5, by the agent\n/);
        const byPath = (p: string) => first.hunks.filter((h) => h.path === p).map((h) => h.unit);
        assert.deepStrictEqual(byPath('image.bin'), ['file']);
        assert.deepStrictEqual(byPath('added.txt'), ['file']);
        assert.deepStrictEqual(byPath('run.sh'), ['hunk', 'mode']);
        assert.ok(first.hunks.every((h) => h.conflict === undefined));
        assert.strictEqual(new Set(first.hunks.map((h) => h.id)).size, first.hunks.length, 'ids are distinct');

        // The first and third hunks of notes.txt, the new file, and run.sh's mode (not its text).
        const runMode = first.hunks.find((h) => h.path === 'run.sh' && h.unit === 'mode')!;
        const added = first.hunks.find((h) => h.path === 'added.txt')!;
        const r = await w.apply('a', { hunks: [notes[0].id, notes[2].id, added.id, runMode.id] });
        assert.deepStrictEqual(r.conflicts, []);
        assert.deepStrictEqual(
          r.applied.map((x) => [x.path, x.action]),
          [
            ['added.txt', 'create'],
            ['notes.txt', 'write'],
            ['run.sh', 'write'],
          ],
        );
        const expected = [...LINES];
        expected[4] = 'line 5, by the agent\n';
        expected.splice(50, 0, 'a line the agent added\n');
        assert.strictEqual(read(path.join(repo, 'notes.txt')), expected.join(''));
        assert.strictEqual(read(path.join(repo, 'added.txt')), 'new file\n');
        assert.strictEqual(read(path.join(repo, 'run.sh')), '#!/bin/sh\necho one\n', "run.sh's text hunk was not chosen");
        assert.strictEqual(fs.statSync(path.join(repo, 'run.sh')).mode & 0o777, 0o755, 'its mode was');
        assert.deepStrictEqual([...fs.readFileSync(path.join(repo, 'image.bin'))], [0, 1, 2, 3], 'the binary file was not chosen');
        // The agent still sees its whole work through the mount.
        assert.strictEqual(read(path.join(mp, 'notes.txt')), agentNotes());
        assert.strictEqual(read(path.join(mp, 'run.sh')), '#!/bin/sh\necho two\n');
        assert.strictEqual(fs.statSync(path.join(mp, 'run.sh')).mode & 0o777, 0o755);

        // What is left: exactly the hunks not chosen, under the same ids, and none in conflict.
        const left = await w.hunks('a');
        const chosen = new Set([notes[0].id, notes[2].id, added.id, runMode.id]);
        assert.deepStrictEqual(
          left.hunks.map((h) => h.id).sort(),
          first.hunks
            .map((h) => h.id)
            .filter((id) => !chosen.has(id))
            .sort(),
        );
        assert.ok(
          left.hunks.every((h) => h.conflict === undefined),
          JSON.stringify(left.hunks.map((h) => h.conflict)),
        );

        // The rest applies cleanly: the layer's base is the folder file written above.
        const rest = await w.apply('a', { hunks: left.hunks.map((h) => h.id) });
        assert.deepStrictEqual(rest.conflicts, []);
        assert.strictEqual(read(path.join(repo, 'notes.txt')), agentNotes());
        assert.strictEqual(read(path.join(repo, 'run.sh')), '#!/bin/sh\necho two\n');
        assert.deepStrictEqual([...fs.readFileSync(path.join(repo, 'image.bin'))], [0, 9, 9]);
        assert.deepStrictEqual(await shadow.layer('a').changes(), [], 'nothing is left in the layer');
      },
      false,
    );
  });

  it("a file's text hunk applied without its mode change: the mode stays the agent's change, still listed", async () => {
    const repo = makeReviewRepo();
    await withWork(
      repo,
      async (w, shadow, mp) => {
        await shadow.createLayer('a');
        await shadow.activate('a');
        fs.writeFileSync(path.join(mp, 'run.sh'), '#!/bin/sh\necho two\n');
        fs.chmodSync(path.join(mp, 'run.sh'), 0o755);
        const first = await w.hunks('a');
        const text = first.hunks.find((h) => h.path === 'run.sh' && h.unit === 'hunk')!;
        const mode = first.hunks.find((h) => h.path === 'run.sh' && h.unit === 'mode')!;
        const r = await w.apply('a', { hunks: [text.id] });
        assert.deepStrictEqual(r.conflicts, []);
        assert.strictEqual(read(path.join(repo, 'run.sh')), '#!/bin/sh\necho two\n');
        assert.strictEqual(fs.statSync(path.join(repo, 'run.sh')).mode & 0o777, 0o644, 'the mode change was not chosen');
        assert.strictEqual(fs.statSync(path.join(mp, 'run.sh')).mode & 0o777, 0o755, "the agent's layer keeps it");
        assert.deepStrictEqual(
          (await w.hunks('a')).hunks.map((h) => h.id),
          [mode.id],
          'what is left is the unit not chosen',
        );
      },
      false,
    );
  });

  it('an id that is no longer a hunk of the layer is CONFLICT, and nothing is written', async () => {
    const repo = makeReviewRepo();
    await withWork(
      repo,
      async (w, shadow) => {
        await shadow.layer('a').write('notes.txt', agentNotes());
        const [h] = (await w.hunks('a')).hunks;
        await shadow.layer('a').write('notes.txt', LINES.join('').replace('line 5\n', 'line five\n'));
        await assert.rejects(w.apply('a', { hunks: [h.id] }), (e: Error & { code?: string }) => e.code === 'CONFLICT');
        assert.strictEqual(read(path.join(repo, 'notes.txt')), LINES.join(''));
        assert.deepStrictEqual((await w.apply('a', { hunks: [] })).applied, [], 'no hunks: nothing applied');
        assert.strictEqual(read(path.join(repo, 'notes.txt')), LINES.join(''));
      },
      false,
    );
  });

  it('the folder changed since the agent copied the file: its hunks are marked; chosen ones are a conflict, or with "agent" go onto your text', async () => {
    const repo = makeReviewRepo();
    await withWork(
      repo,
      async (w, shadow, mp) => {
        await shadow.createLayer('a');
        await shadow.activate('a');
        read(path.join(mp, 'notes.txt')); // the agent reads it first: its base is recorded with a hash
        fs.writeFileSync(path.join(mp, 'notes.txt'), agentNotes());
        // The user edits line 20 of their folder meanwhile: a region no agent hunk touches.
        const mine = [...LINES];
        mine[19] = 'line 20, by the user\n';
        fs.writeFileSync(path.join(repo, 'notes.txt'), mine.join(''));
        const listed = (await w.hunks('a')).hunks;
        // Against your folder now, the agent's file also undoes your line 20: that shows as a hunk
        // of its own, and every hunk of the file says why it is a conflict.
        assert.strictEqual(listed.length, 4, listed.map((h) => h.text).join('\n'));
        assert.ok(
          listed.every((h) => /changed since the agent copied it/.test(h.conflict ?? '')),
          JSON.stringify(listed),
        );
        const undo = listed.find((h) => h.text.includes('-line 20, by the user'))!;
        const agentOnly = listed.filter((h) => h !== undo).map((h) => h.id);
        const refused = await w.apply('a', { hunks: agentOnly });
        assert.deepStrictEqual(
          refused.conflicts.map((c) => c.path),
          ['notes.txt'],
        );
        assert.strictEqual(read(path.join(repo, 'notes.txt')), mine.join(''), 'nothing written for the conflict');
        // Resolved "agent": the chosen hunks go onto the folder's text as it is; the user's line 20 stays.
        const done = await w.apply('a', { hunks: agentOnly, resolutions: { 'notes.txt': 'agent' } });
        assert.deepStrictEqual(done.conflicts, []);
        const expected = agentNotes().replace('line 20\n', 'line 20, by the user\n');
        assert.strictEqual(read(path.join(repo, 'notes.txt')), expected);
        // The layer still holds the agent's file: what is left is the undoing of the user's line, not in conflict now.
        const left = (await w.hunks('a')).hunks;
        assert.deepStrictEqual(
          left.map((h) => h.id),
          [undo.id],
        );
        assert.strictEqual(left[0].conflict, undefined);
      },
      false,
    );
  });

  it('rejections are kept in the state directory, taken once, and reverted in the layer only when asked', async () => {
    const repo = makeReviewRepo();
    await withWork(
      repo,
      async (w, shadow) => {
        await shadow.layer('a').write('notes.txt', agentNotes());
        await shadow.layer('a').write('added.txt', 'new\n');
        const hs = (await w.hunks('a')).hunks;
        const notes = hs.filter((h) => h.path === 'notes.txt');
        const r1 = await w.reject('a', [{ id: notes[1].id, reason: 'keep line 40 as it is' }]);
        assert.deepStrictEqual(r1.reverted, []);
        assert.strictEqual((await shadow.layer('a').readFile('notes.txt')).toString(), agentNotes(), 'the layer keeps a rejected hunk');
        assert.strictEqual(r1.rejected[0].lines, '37-43');
        assert.match(r1.rejected[0].excerpt, /\+line 40, by the agent/);
        // Persisted: another service of the same folder reads them.
        const again = new (w.constructor as typeof import('../src/work/service').WorkService)(shadow);
        try {
          const [rec] = again.rejections('a');
          assert.strictEqual(rec.reason, 'keep line 40 as it is');
          assert.strictEqual(rec.path, 'notes.txt');
          assert.strictEqual(rec.delivered, false);
          assert.deepStrictEqual(
            again.rejections('a', true).map((x) => x.id),
            [notes[1].id],
          );
          assert.deepStrictEqual(again.rejections('a', true), [], 'taken once');
          assert.strictEqual(again.rejections('a')[0].delivered, true);
        } finally {
          await again.dispose();
        }
        // With revert: the hunk leaves the layer (the folder's lines there), a whole file is reverted.
        const added = hs.find((h) => h.path === 'added.txt')!;
        const r2 = await w.reject(
          'a',
          [
            { id: notes[0].id, reason: 'no' },
            { id: added.id, reason: 'not wanted' },
          ],
          { revert: true },
        );
        assert.deepStrictEqual(r2.reverted.sort(), ['added.txt', 'notes.txt']);
        const expected = agentNotes().replace('line 5, by the agent\n', 'line 5\n');
        assert.strictEqual((await shadow.layer('a').readFile('notes.txt')).toString(), expected);
        assert.deepStrictEqual(
          (await w.hunks('a')).hunks.map((h) => h.id),
          [notes[1].id, notes[2].id],
        );
        assert.deepStrictEqual(
          w.rejections('a').map((x) => [x.reason, x.reverted]),
          [
            ['keep line 40 as it is', false],
            ['no', true],
            ['not wanted', true],
          ],
        );
        assert.strictEqual(read(path.join(repo, 'notes.txt')), LINES.join(''), 'the folder is never written by a rejection');
      },
      false,
    );
  });

  it('a rejection with revert goes on past a path the layer cannot give back, records every rejection and says which stayed', async () => {
    const repo = makeReviewRepo();
    fs.mkdirSync(path.join(repo, 'docs'));
    fs.writeFileSync(path.join(repo, 'docs', 'guide.md'), 'guide\n');
    execFileSync('git', ['-C', repo, 'add', '-A']);
    execFileSync('git', ['-C', repo, 'commit', '-q', '-m', 'docs']);
    await withWork(
      repo,
      async (w, shadow, mp) => {
        await shadow.createLayer('a');
        await shadow.activate('a');
        // A directory moved: its files can only go back with the whole directory (CONFLICT).
        fs.renameSync(path.join(mp, 'docs'), path.join(mp, 'manual'));
        fs.writeFileSync(path.join(mp, 'manual', 'guide.md'), 'guide, rewritten\n');
        fs.writeFileSync(path.join(mp, 'added.txt'), 'new file\n');
        const hs = (await w.hunks('a')).hunks;
        assert.deepStrictEqual(hs.map((h) => h.path).sort(), ['added.txt', 'docs/guide.md', 'manual/guide.md']);
        const r = await w.reject(
          'a',
          hs.map((h) => ({ id: h.id, reason: `not ${h.path}` })),
          { revert: true },
        );
        assert.deepStrictEqual(r.reverted, ['added.txt']);
        assert.deepStrictEqual(
          r.notReverted.map((n) => [n.path, n.code]),
          [
            ['docs/guide.md', 'CONFLICT'],
            ['manual/guide.md', 'CONFLICT'],
          ],
        );
        assert.deepStrictEqual(
          w.rejections('a').map((x) => [x.path, x.reverted]),
          hs.map((h) => [h.path, h.path === 'added.txt']),
          'every rejection recorded, in the order given; reverted only where it was',
        );
        assert.ok(!fs.existsSync(path.join(mp, 'added.txt')), 'the path that could go back went back');
        assert.strictEqual(read(path.join(mp, 'manual', 'guide.md')), 'guide, rewritten\n', 'the one that could not is as it was');
      },
      false,
    );
  });

  it('a conflict in text that is not UTF-8 (Latin-1) is never merged or marked: both files keep every byte', async () => {
    // Decoded as UTF-8, each Latin-1 letter came back as U+FFFD: "merged" wrote that into the
    // folder, and markConflicts into the agent's layer.
    const repo = makeReviewRepo();
    const latin = (s: string): Buffer => Buffer.from(s, 'latin1');
    const start = latin('caf\xe9 1\nl2\nl3\nl4\nl5\nl6\nna\xefve 7\n');
    fs.writeFileSync(path.join(repo, 'latin.txt'), start);
    execFileSync('git', ['-C', repo, 'add', '-A']);
    execFileSync('git', ['-C', repo, 'commit', '-q', '-m', 'latin']);
    await withWork(
      repo,
      async (w, shadow, mp) => {
        await shadow.createLayer('a');
        await shadow.activate('a');
        const agent = Buffer.concat([start, latin('agent \xe0\n')]);
        fs.writeFileSync(path.join(mp, 'latin.txt'), agent);
        const mine = Buffer.concat([latin('you \xfc\n'), start]);
        fs.writeFileSync(path.join(repo, 'latin.txt'), mine);
        const d = await w.diff('a');
        assert.strictEqual(d.files.find((f) => f.path === 'latin.txt')?.binary, true);
        const r = await w.apply('a', { resolutions: { 'latin.txt': 'merged' } });
        assert.deepStrictEqual(
          r.conflicts.map((c) => [c.path, c.binary, c.merged]),
          [['latin.txt', true, null]],
        );
        assert.match(r.conflicts[0].reason, /not UTF-8 text: nothing is merged/);
        const m = await w.apply('a', { markConflicts: true });
        assert.deepStrictEqual(m.marked ?? [], []);
        assert.ok(fs.readFileSync(path.join(repo, 'latin.txt')).equals(mine), 'your file keeps its bytes');
        assert.ok(fs.readFileSync(path.join(mp, 'latin.txt')).equals(agent), "the agent's file keeps its bytes");
      },
      false,
    );
  });

  it('a conflict shows only its regions with 3 lines around; markConflicts writes the markers into the layer; resolved there, it applies', async () => {
    const repo = makeReviewRepo();
    const big = Array.from({ length: 300 }, (_, i) => `row ${i + 1}\n`);
    fs.writeFileSync(path.join(repo, 'big.txt'), big.join(''));
    execFileSync('git', ['-C', repo, 'add', '-A']);
    execFileSync('git', ['-C', repo, 'commit', '-q', '-m', 'big']);
    await withWork(
      repo,
      async (w, shadow, mp) => {
        await shadow.createLayer('a');
        await shadow.activate('a');
        const agent = [...big];
        agent[149] = 'row 150, by the agent\n';
        fs.writeFileSync(path.join(mp, 'big.txt'), agent.join(''));
        const mine = [...big];
        mine[149] = 'row 150, by you\n';
        fs.writeFileSync(path.join(repo, 'big.txt'), mine.join(''));
        const r = await w.apply('a', { dryRun: true });
        const [c] = r.conflicts;
        assert.strictEqual(c.mergeConflicts, 1);
        assert.deepStrictEqual(
          c.regions?.map((g) => [g.startLine, g.endLine]),
          [[147, 159]],
        );
        assert.strictEqual(
          c.regions![0].text,
          [
            'row 147',
            'row 148',
            'row 149',
            '<<<<<<< folder',
            'row 150, by you',
            '||||||| base',
            'row 150',
            '=======',
            'row 150, by the agent',
            '>>>>>>> agent',
            'row 151',
            'row 152',
            'row 153',
          ].join('\n'),
        );
        // Marked: the layer holds the merge with its markers; the folder keeps yours.
        const m = await w.apply('a', { markConflicts: true });
        assert.deepStrictEqual(m.marked, ['big.txt']);
        assert.strictEqual(read(path.join(repo, 'big.txt')), mine.join(''));
        assert.strictEqual(read(path.join(mp, 'big.txt')), c.merged);
        // Applied as it is, the markers would reach the folder: a conflict.
        const again = await w.apply('a');
        assert.deepStrictEqual(
          again.conflicts.map((x) => x.path),
          ['big.txt'],
        );
        assert.match(again.conflicts[0].reason, /still holds conflict markers/);
        assert.strictEqual(read(path.join(repo, 'big.txt')), mine.join(''));
        // Resolved in the shadow (as an editor would), it applies without a conflict.
        const resolved = [...big];
        resolved[149] = 'row 150, by both of us\n';
        fs.writeFileSync(path.join(mp, 'big.txt'), resolved.join(''));
        const done = await w.apply('a');
        assert.deepStrictEqual(done.conflicts, []);
        assert.strictEqual(read(path.join(repo, 'big.txt')), resolved.join(''));
      },
      false,
    );
  });

  it('pure: any subset of hunks applied, then the rest, gives the agent text; the rest keep their ids', () => {
    let seed = 7;
    const rnd = (n: number): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n;
    for (let round = 0; round < 200; round++) {
      const old = Array.from({ length: 5 + rnd(80) }, (_, i) => `l${i}\n`);
      const next = [...old];
      for (let k = rnd(6); k >= 0; k--) {
        const at = rnd(next.length + 1);
        const op = rnd(3);
        if (op === 0) next.splice(at, 0, `new ${round}.${k}\n`);
        else if (op === 1 && next.length > 1) next.splice(Math.min(at, next.length - 1), 1);
        else if (next.length) next[Math.min(at, next.length - 1)] = `changed ${round}.${k}\n`;
      }
      const noEol = rnd(3) === 0;
      const oldText = old.join('');
      const newText = noEol ? next.join('').replace(/\n$/, '') : next.join('');
      const side = (t: string) => ({ kind: 'file' as const, mode: 0o100644, data: Buffer.from(t) });
      const change = { path: 'f.txt', old: side(oldText), new: side(newText) };
      const units = reviewUnits([change]);
      const some = new Set(units.filter(() => rnd(2) === 0).map((u) => u.id));
      const mid = withChosen(change, some).data.toString();
      const restChange = { path: 'f.txt', old: side(mid), new: side(newText) };
      const rest = reviewUnits([restChange]);
      assert.deepStrictEqual(
        rest.map((u) => u.id).sort(),
        units
          .map((u) => u.id)
          .filter((id) => !some.has(id))
          .sort(),
        `round ${round}`,
      );
      assert.strictEqual(withChosen(restChange, new Set(rest.map((u) => u.id))).data.toString(), newText, `round ${round}`);
      assert.strictEqual(withChosen(change, new Set()).data.toString(), oldText);
    }
  });
});
