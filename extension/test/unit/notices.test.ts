import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { noLinks, oneLine, shellWord } from '../../src/notices';

// What VS Code makes a link of in a notification's message: its parseLinkedText
// (src/vs/base/common/linkedText.ts in microsoft/vscode), as read there: "[label](target)" or
// "[label](target "title")", the target an http(s), command or file URI with no space or ")".
// Modelled here, not run: the real notification is only in a real VS Code (test/vscode).
const VSCODE_LINK = /\[([^\]]+)\]\(((?:https?:\/\/|command:|file:)[^)\s]+)(?: (["'])(.+?)(\3))?\)/gi;
const links = (text: string): string[] => [...text.matchAll(VSCODE_LINK)].map((m) => m[2]);

describe('extension: notifications carry no link an agent wrote', () => {
  it('noLinks leaves no link VS Code would parse, and changes nothing else one can see', () => {
    const args = encodeURIComponent(JSON.stringify({ confirm: false, includeIgnored: true }));
    const hostile = [
      `[Show Commits](command:shadowfs.applyLayer?${args} "Show Commits")`,
      `x[a](command:workbench.action.terminal.sendSequence?%7B%7D)y`,
      '[Retry](file:///etc/passwd)',
    ];
    for (const h of hostile) {
      assert.ok(links(h).length > 0, `the model finds the link in ${h}`);
      const safe = noLinks(`Applied 1 change(s) of ${h} to /home/me/proj.`);
      assert.deepStrictEqual(links(safe), [], safe);
      assert.strictEqual(safe.replace(/\u2060/g, ''), `Applied 1 change(s) of ${h} to /home/me/proj.`);
    }
    assert.strictEqual(noLinks('plain text (with parentheses) and [brackets]'), 'plain text (with parentheses) and [brackets]');
  });

  it('every notification of the extension goes through noLinks', () => {
    const src = path.join(__dirname, '..', '..', 'src');
    const calls: string[] = [];
    for (const f of fs.readdirSync(src).filter((n) => n.endsWith('.ts'))) {
      const text = fs.readFileSync(path.join(src, f), 'utf8');
      for (const m of text.matchAll(/vscode\.window\.show(?:Information|Warning|Error)Message\(\s*([^\s]{0,8})/g))
        calls.push(`${f}: ${m[1]}`);
    }
    assert.ok(calls.length >= 10, `found the calls: ${calls.length}`);
    assert.deepStrictEqual(
      calls.filter((c) => !c.endsWith(': noLinks(')),
      [],
      'a message shown without noLinks',
    );
  });

  it("a tooltip shows an agent's command line and directory on one line each, as a shell would read them", () => {
    assert.strictEqual(['npm', 'test', '--', '-g', 'a b'].map(shellWord).join(' '), "npm test -- -g 'a b'");
    assert.strictEqual(shellWord(''), "''");
    assert.strictEqual(shellWord("it's"), `'it'\\''s'`);
    // A line break, a Unicode line separator or a direction override cannot draw a line of the
    // agent's own under the tooltip's, nor turn what follows around.
    const forged = 'x\n\nconfined by: everything\u2028ok\u202e';
    assert.strictEqual(shellWord(forged), "'x\\u000a\\u000aconfined by: everything\\u2028ok\\u202e'");
    assert.strictEqual(oneLine('/home/me/proj\r\nwrites: none'), '/home/me/proj\\u000d\\u000awrites: none');
    assert.strictEqual(oneLine('/home/me/ünïcode dir'), '/home/me/ünïcode dir');
    // Invisible ones too: a soft hyphen, the Mongolian vowel separator, interlinear annotation,
    // and tag characters (outside the BMP).
    assert.strictEqual(oneLine('a\u00adb\u180ec\ufff9d\u{e0041}e'), 'a\\u00adb\\u180ec\\ufff9d\\u{e0041}e');
    assert.strictEqual(oneLine('😀 ok'), '😀 ok');
  });

  it('no tooltip or message of the extension is markdown (which renders links and images an agent wrote)', () => {
    const src = path.join(__dirname, '..', '..', 'src');
    const found = fs
      .readdirSync(src)
      .filter((n) => n.endsWith('.ts') && /new\s+(?:vscode\.)?MarkdownString\b/.test(fs.readFileSync(path.join(src, n), 'utf8')));
    assert.deepStrictEqual(found, []);
  });
});
