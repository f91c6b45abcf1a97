// The README is the front door and docs/ holds the rest (issue 30): the README stays short, and
// every relative link in them (and in the extension's and installer's READMEs) reaches a file that
// exists and, with an anchor, a heading that exists there. Headings become anchors as GitHub makes
// them: lower case, punctuation dropped, spaces turned into dashes, repeats numbered.
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';

const root = path.join(__dirname, '..', '..', '..');
const README_MAX_LINES = 300;

function markdownFiles(): string[] {
  const docs = fs
    .readdirSync(path.join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => path.join('docs', f));
  return ['README.md', ...docs, path.join('extension', 'README.md'), path.join('installer', 'README.md')].filter((f) =>
    fs.existsSync(path.join(root, f)),
  );
}

/** The anchors GitHub gives the headings of a markdown text (outside code blocks). */
export function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const m = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = m[1]
      .replace(/<[^>]+>/g, '')
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Relative links of a markdown text (outside code blocks and inline code): [text](target). */
export function linksOf(text: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const line of text.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (fenced) continue;
    const prose = line.replace(/`[^`]*`/g, '');
    for (const m of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:, vscode:
      out.push(target);
    }
  }
  return out;
}

describe('the README and docs/', () => {
  it(`the README is a front door: at most ${README_MAX_LINES} lines`, () => {
    const lines = fs.readFileSync(path.join(root, 'README.md'), 'utf8').split('\n').length;
    assert.ok(lines <= README_MAX_LINES, `README.md has ${lines} lines; move detail to docs/`);
  });

  it('every relative link reaches a file, and every anchor a heading there', () => {
    const broken: string[] = [];
    for (const file of markdownFiles()) {
      const text = fs.readFileSync(path.join(root, file), 'utf8');
      for (const link of linksOf(text)) {
        const [target, anchor] = link.split('#') as [string, string | undefined];
        const dest = target === '' ? path.join(root, file) : path.resolve(path.dirname(path.join(root, file)), decodeURI(target));
        if (!fs.existsSync(dest)) {
          broken.push(`${file}: ${link} (no such file)`);
          continue;
        }
        if (anchor && dest.endsWith('.md') && !anchorsOf(fs.readFileSync(dest, 'utf8')).has(anchor))
          broken.push(`${file}: ${link} (no such heading)`);
      }
    }
    assert.deepStrictEqual(broken, []);
  });

  it('the link check finds what is broken (a missing file, a missing heading) and follows GitHub anchors', () => {
    const text =
      '# A title\n## Windows: the `winfsp` backend\n## A title\n```\n# not a heading\n[x](nowhere.md)\n```\n[y](#a-title-1) [z](http://x)';
    assert.deepStrictEqual([...anchorsOf(text)], ['a-title', 'windows-the-winfsp-backend', 'a-title-1']);
    assert.deepStrictEqual(linksOf(text), ['#a-title-1']);
    assert.deepStrictEqual(linksOf('[a](docs/none.md#x) `[b](c.md)`'), ['docs/none.md#x']);
  });
});
