// Unit tests of src/common/glob-match.ts, the glob matcher the file tools (glob, grep's glob
// filter) and the audit trail's path filter use: the syntax they promise, what is refused, and
// that hostile patterns cost little. No mount needed.
import * as assert from 'assert';
import { ShadowError } from '../../src/common/errors';
import { compileAuditGlob, compileGlob, expandBraces, globWork, type GlobMatcher } from '../../src/common/glob-match';

function check(glob: string, yes: string[], no: string[], opts: { basename?: boolean } = {}): void {
  const m = compileGlob(glob, opts);
  for (const p of yes) assert.strictEqual(m(p), true, `${glob} should match ${p}`);
  for (const p of no) assert.strictEqual(m(p), false, `${glob} should not match ${p}`);
}

function refusedWith(glob: string, re: RegExp): void {
  assert.throws(
    () => compileGlob(glob),
    (err: unknown) => {
      assert.ok(err instanceof ShadowError, `expected a ShadowError, got ${String(err)}`);
      assert.strictEqual(err.code, 'INVALID_ARGUMENT');
      assert.match(err.message, re);
      return true;
    },
    glob,
  );
}

/** Matches `path` and checks the work done against the bound the NFA simulation guarantees. */
function boundedMatch(m: GlobMatcher, path: string): boolean {
  const before = globWork.visits;
  const r = m(path);
  const visits = globWork.visits - before;
  const bound = m.size * (Array.from(path).length + 1);
  assert.ok(visits <= bound, `${visits} node visits for a ${path.length}-character path, more than ${bound}`);
  return r;
}

describe('glob matcher: syntax', () => {
  it('* and ? stay within a name; hidden names match (dot: true)', () => {
    check('*', ['a', '.env', 'a.b'], ['a/b', '']);
    check('*.js', ['a.js', '.js', '.x.js'], ['a.ts', 'src/a.js']);
    check('src/*.js', ['src/a.js'], ['src/x/a.js', 'a.js']);
    check('?', ['a', '.'], ['ab', '/']);
    check('a?c', ['abc'], ['a/c', 'ac', 'abbc']);
    check('a**b', ['ab', 'axxb'], ['ax/b'], {}); // "**" inside a name is "*"
  });

  it('** as a whole name: zero or more names', () => {
    check('**', ['a', 'a/b/c', '.git/x'], []);
    check('**/*.js', ['a.js', 'x/y/a.js', 'x/.y/z.js'], ['a.ts', 'x/a.jsx']);
    check('**/x', ['x', 'a/x', 'a/b/x'], ['ax', 'x/a']);
    check('a/**', ['a', 'a/b', 'a/b/c'], ['ab', 'b/a']);
    check('a/**/b', ['a/b', 'a/x/b', 'a/x/y/b'], ['a/xb', 'ab', 'a/b/c']);
    check('a/**/**/b', ['a/b', 'a/x/y/b'], ['b']);
  });

  it('classes, ranges and negated classes, never "/"', () => {
    check('[abc]x', ['ax', 'cx'], ['dx', 'x']);
    check('[a-c]x', ['bx'], ['dx']);
    check('[!a]', ['b', '.'], ['a', '/']);
    check('[^a]', ['b'], ['a']);
    check('a[!b]c', ['axc'], ['abc', 'a/c']);
    check('[]a]', [']', 'a'], ['b']);
    check('[a-]', ['a', '-'], ['b']);
    check('x[', ['x['], ['x']); // unclosed: literal
  });

  it('backslash escapes', () => {
    check('a\\*b', ['a*b'], ['axb']);
    check('\\[x\\]', ['[x]'], ['x']);
    check('\\{a,b\\}', ['{a,b}'], ['a']);
    check('\\!x', ['!x'], ['y']);
  });

  it('braces, nested, and ranges', () => {
    check('*.{js,ts}', ['a.js', 'a.ts'], ['a.md']);
    check('{src,test}/**/*.ts', ['src/a.ts', 'test/x/b.ts'], ['lib/a.ts']);
    check('a{b,{c,d}}e', ['abe', 'ace', 'ade'], ['ae']);
    check('f{1..3}.txt', ['f1.txt', 'f3.txt'], ['f4.txt', 'f0.txt']);
    check('{a..c}', ['a', 'b', 'c'], ['d']);
    check('{a}', ['{a}'], ['a']); // no comma, no range: literal
    check('{a,b', ['{a,b'], ['a']); // unclosed: literal
    assert.deepStrictEqual(expandBraces('{a,b}{1..2}'), ['a1', 'a2', 'b1', 'b2']);
  });

  it('a leading ! negates; basename matches the last name', () => {
    check('!*.js', ['a.ts', 'd/a.ts', 'd/a.js'], ['a.js']);
    check('*.log', ['a.log', 'x/y/a.log'], ['a.log/x'], { basename: true });
  });

  it('plans the walk: literal paths, base directories, depth', () => {
    assert.deepStrictEqual(compileGlob('src/a.js').plan, { literal: 'src/a.js', base: 'src', depth: 1, negated: false });
    assert.strictEqual(compileGlob('a\\*b').plan.literal, 'a*b');
    assert.deepStrictEqual(compileGlob('node_modules/pkg/*.js').plan, {
      literal: null,
      base: 'node_modules/pkg',
      depth: 1,
      negated: false,
    });
    assert.deepStrictEqual(compileGlob('{a,b}/*/x').plan, { literal: null, base: '', depth: 3, negated: false });
    assert.deepStrictEqual(compileGlob('a/{b,c}/x').plan, { literal: null, base: 'a', depth: 2, negated: false });
    assert.strictEqual(compileGlob('src/**/x').plan.depth, Infinity);
    assert.strictEqual(compileGlob('!src/x').plan.depth, Infinity);
  });

  it('refuses extglobs, POSIX classes and blow-ups with INVALID_ARGUMENT naming the syntax', () => {
    for (const g of ['@(a|b)', '!(x)', '+(a)', 'x*(a)', '?(a)']) refusedWith(g, /extglobs are not supported.*supported: \*/);
    refusedWith('[[:alpha:]]', /POSIX character classes/);
    refusedWith('{a,b}'.repeat(11), /more than 1024 patterns/);
    refusedWith('{1..5000}', /more than 1024 values/);
    refusedWith('x'.repeat(1025), /longer than 1024/);
    refusedWith(`{${Array.from({ length: 100 }, (_, i) => `${i}${'x'.repeat(90)}`).join(',')}}`, /longer than 1024/);
    refusedWith(`${'{a,b}'.repeat(9)}${'x'.repeat(20)}`, /more than 8192 characters/);
    refusedWith('[z-a]', /backwards/);
    assert.strictEqual(compileGlob('a\\(b)')('a(b)'), true, 'an escaped parenthesis is fine');
  });
});

describe('glob matcher: hostile patterns cost O(pattern × path)', () => {
  // The bound is asserted on work done (node visits), not time; a backtracking matcher on these
  // inputs would take hours, so a regression would also trip mocha's timeout.
  const longName = 'a'.repeat(255);
  const deep = Array.from({ length: 200 }, () => 'a').join('/');
  const deepX = `${deep}/y`;

  it('*a*a*…b against a 255-character name', () => {
    const m = compileGlob('*a*a*a*a*a*a*a*a*a*a*b');
    assert.strictEqual(boundedMatch(m, longName), false);
    assert.strictEqual(boundedMatch(m, `${longName}b`), true);
    const star = compileGlob(`${'*a'.repeat(100)}*b`);
    assert.strictEqual(boundedMatch(star, longName), false);
    assert.strictEqual(boundedMatch(compileGlob(`${'*a'.repeat(100)}*b`, { basename: true }), `${deep}/${longName}`), false);
  });

  it('**/**/… against a path 200 names deep', () => {
    const m = compileGlob('**/**/**/**/**/**/**/**/x');
    assert.strictEqual(boundedMatch(m, deepX), false);
    assert.strictEqual(boundedMatch(m, `${deep}/x`), true);
    const mixed = compileGlob(`${'**/a*/'.repeat(40)}x`);
    assert.strictEqual(boundedMatch(mixed, deepX), false);
  });

  it('{a,b}{a,b}… within the expansion cap, against long names and deep paths', () => {
    const m = compileGlob(`${'{a,b}'.repeat(9)}*c`); // 512 alternatives
    assert.strictEqual(boundedMatch(m, longName), false);
    assert.strictEqual(boundedMatch(m, deepX), false);
    assert.strictEqual(boundedMatch(m, `${'a'.repeat(9)}xc`), true);
    const stars = compileGlob(`{${Array.from({ length: 30 }, () => '*a').join(',')}}${'*a'.repeat(30)}*b`);
    assert.strictEqual(boundedMatch(stars, longName), false);
  });
});

describe('glob matcher: a whole call is bounded too (MAX_GLOB_VISITS)', () => {
  it('braces that keep hundreds of wildcards open stop with TIMEOUT over a tree, and ordinary patterns never come near the budget', () => {
    // A review's 18-character glob: 988 alternatives, each with a "*", all live at once, so no
    // transition is cached and every character of every path costs about 17,500 visits.
    const paths = Array.from({ length: 1000 }, (_, i) => `src/dir${i}/${'a'.repeat(200)}`);
    for (const pattern of ['**/*{a..z}*{0..37}', '**/*{a..z}?{0..37}']) {
      const m = compileGlob(pattern);
      assert.throws(
        () => paths.forEach((p) => m(p)),
        (err: unknown) => err instanceof ShadowError && err.code === 'TIMEOUT' && /fewer alternatives or wildcards/.test(err.message),
        pattern,
      );
    }
    for (const pattern of ['**/*.{ts,tsx}', '{src,test,bench}/**/*.{ts,js,json,md}', '**/node_modules/**/package.json']) {
      const m = compileGlob(pattern);
      const before = globWork.visits;
      for (let i = 0; i < 20_000; i++) m(`src/a/b${i % 50}/c/file${i}${i % 2 ? '.ts' : '.js'}`);
      assert.ok(globWork.visits - before < 10_000, `${pattern}: ${globWork.visits - before} visits for 20,000 paths`);
    }
  });
});

describe('audit globs (the audit trail keeps its own, smaller syntax)', () => {
  function audit(glob: string, yes: string[], no: string[]): void {
    const m = compileAuditGlob(glob);
    for (const p of yes) assert.strictEqual(m(p), true, `${glob} should match ${p}`);
    for (const p of no) assert.strictEqual(m(p), false, `${glob} should not match ${p}`);
  }

  it('anchored with "/", else a name at any depth; and what is inside a match', () => {
    audit('c.txt', ['c.txt', 'd/c.txt', 'c.txt/x'], ['xc.txt', 'c.txt2']);
    audit('d/**', ['d/a', 'd/a/b'], ['x/d/a']);
    audit('src/*.ts', ['src/a.ts', 'src/a.ts/x'], ['x/src/a.ts', 'src/a/b.ts']);
    audit('src**', ['src', 'srcx/y'], ['x']); // "**" not before "/": anything, across "/"
    audit('a/**/b', ['a/b', 'a/x/y/b'], ['a/xb']);
    audit('[x]', ['[x]'], ['x']); // brackets are literal here
  });

  it('*a*a*…b over long names and deep paths is cheap', () => {
    const m = compileAuditGlob('*a*a*a*a*a*a*a*a*a*a*b');
    for (const p of ['a'.repeat(255), Array.from({ length: 200 }, () => 'a'.repeat(20)).join('/')]) {
      const before = globWork.visits;
      assert.strictEqual(m(p), false);
      assert.ok(globWork.visits - before <= m.size * (p.length + 1));
    }
  });
});
