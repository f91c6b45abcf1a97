// Text for VS Code's notifications. A notification's message is not plain text: VS Code makes
// "[label](command:id?args)" in it a link, and a click runs that command with those arguments
// (shadowfs.applyLayer included). Messages here carry what an agent chose (a commit subject, a
// file name, an error quoting one), so every one goes through noLinks(), which breaks that syntax
// and shows the same characters otherwise. The output channel is plain text and needs none of it.

/** `text` with no "](" left, so no part of it becomes a link in a notification. */
export function noLinks(text: string): string {
  // VS Code's parser wants "]" followed at once by "("; a zero-width joiner between them is
  // invisible and leaves nothing to parse.
  return text.replace(/\]\(/g, ']\u2060(');
}

// Tooltips are plain strings (a MarkdownString would render an agent's text as links and
// images), but plain text still shows a line break as one: an agent's command line or
// directory with one could draw lines of its own ("confined by: …") under ours.

/** Characters that would break a line, or reorder or hide what follows, shown as escapes. */
const UNSEEN =
  /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]|[\u{e0000}-\u{e007f}]/gu;

/** `text` on one line, every control, line-separating, invisible or direction character escaped. */
export function oneLine(text: string): string {
  return text.replace(UNSEEN, (c) => {
    const code = c.codePointAt(0)!;
    return code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/** One word of a command line as a shell would need it: bare when plain, else quoted. */
export function shellWord(word: string): string {
  if (/^[\w@%+=:,./-]+$/.test(word)) return word;
  return `'${oneLine(word).replace(/'/g, `'\\''`)}'`;
}
