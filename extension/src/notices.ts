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
