// `shadowfs shell <folder|shadow> --agent A [-- command args…]`: an interactive program (the
// user's shell by default) on a real terminal, as agent A, in A's own view of the shadow at the
// folder's own path, confined as runs are. This terminal is joined to it: keys go in as typed
// (raw mode: Ctrl-C, Ctrl-Z and job control reach the program), window resizes follow, and the
// program's exit status is this command's. The session lives in the daemon: if this terminal goes
// away the program goes on, and the same command joins it again. On exit it says what the agent
// changed and how to review, apply or drop it.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import type { Argv, CommandModule } from 'yargs';
import type { ShadowClient } from '../../client/client';
import { ShadowError } from '../../common/errors';
import type { ShellInfo } from '../../protocol/shell';
import { connectCli, tell } from '../daemon-call';
import { emit, reportError, shownName } from '../output';

interface Args {
  target?: string;
  agent?: string;
  list: boolean;
  close?: string;
  new: boolean;
  env: string[];
  network: boolean;
  unprotected: boolean;
  writable: string[];
  readable: string[];
  json: boolean;
  '--'?: string[];
  command?: string[];
}

export const shellCommand: CommandModule<object, Args> = {
  command: 'shell [target] [command..]',
  describe: "Open an interactive terminal session as an agent in its own view of a shadow (the agent's shell, or the command after --)",
  builder: (y: Argv) =>
    y
      .positional('target', {
        type: 'string',
        describe: 'the folder (mounted as a shadow if it is not one yet), or a shadow name or mount point; default: the current folder',
      })
      .option('agent', { type: 'string', describe: 'whose layer the session sees and writes' })
      .option('new', {
        type: 'boolean',
        default: false,
        describe: 'start another session even if the agent has one running (default: join it)',
      })
      .option('env', { type: 'string', array: true, default: [], describe: 'NAME=value for the program, repeatable' })
      .option('network', { type: 'boolean', default: true, describe: '--no-network gives the session only loopback' })
      .option('unprotected', {
        type: 'boolean',
        default: false,
        describe: 'Windows: start the session even when it cannot be given a Low-integrity token (then it can write your folder)',
      })
      .option('writable', {
        type: 'string',
        array: true,
        default: [],
        describe: "a directory apart from the folder the session may also write (an agent CLI's login, e.g. ~/.claude); repeatable",
      })
      .option('readable', {
        type: 'string',
        array: true,
        default: [],
        describe: 'a directory apart from the folder the session may read; repeatable',
      })
      .option('list', { type: 'boolean', default: false, describe: 'list the sessions (of the target shadow, or all) and exit' })
      .option('close', { type: 'string', describe: 'end the session with this id (as closing its terminal would) and exit' })
      .option('json', { type: 'boolean', default: false, describe: 'with --list or --close: print JSON' })
      .example('$0 shell . --agent claude -- claude', 'Claude Code in its own shadow of this folder')
      .example('$0 shell ~/proj --agent a', "a's shell; run the same again to join it after a disconnect") as Argv<Args>,
  handler: async (args) => {
    let client: ShadowClient | undefined;
    try {
      client = await connectCli();
      if (args.list) {
        const shadow = args.target === undefined ? undefined : await shadowFor(client, args.target, false);
        const r = await client.request('shell.list', shadow === undefined ? {} : { shadow });
        emit(args, r, r.sessions.length === 0 ? 'no shell sessions' : r.sessions.map(describe).join('\n'));
        return;
      }
      if (args.close !== undefined) {
        const r = await client.request('shell.close', { sessionId: args.close });
        emit(args, r, `ended ${describe(r)}`);
        return;
      }
      if (!args.agent) throw new ShadowError('INVALID_ARGUMENT', 'name the agent whose layer the session uses: --agent NAME');
      const argv = [...(args.command ?? []), ...(args['--'] ?? [])].map(String);
      const target = args.target ?? '.';
      const shadow = await shadowFor(client, target, true);
      process.exitCode = await joinOrStart(client, shadow, target, args.agent, argv, args);
    } catch (err) {
      reportError(args, err);
    } finally {
      client?.close();
    }
  },
};

function describe(s: ShellInfo): string {
  const state = s.running ? `running, ${s.attached} attached` : s.signal ? `ended by ${s.signal}` : `exited ${String(s.exitCode)}`;
  return `${s.sessionId}  ${s.shadow}  agent ${s.agent}  ${s.argv.join(' ')}  (${state}, since ${s.startedAt})`;
}

/**
 * The shadow `target` names: a shadow's name or (a path in) its mount point, or a folder some
 * shadow shows; a folder no shadow shows yet is mounted when `mount` is set.
 */
async function shadowFor(client: ShadowClient, target: string, mount: boolean): Promise<string> {
  const { shadows } = await client.request('list');
  const abs = path.resolve(target);
  const byName = shadows.find((s) => s.name === target || abs === s.mountPoint || abs.startsWith(`${s.mountPoint}/`));
  if (byName) return byName.name;
  let real: string;
  try {
    real = fs.realpathSync(abs);
  } catch {
    throw new ShadowError('NOT_FOUND', `${target} is neither a shadow nor a folder (shadowfs list shows the shadows)`);
  }
  const byFolder = shadows.find((s) => real === s.folder || real.startsWith(`${s.folder}/`));
  if (byFolder) return byFolder.name;
  if (!mount) throw new ShadowError('UNKNOWN_SHADOW', `no shadow shows ${real}`);
  tell(`mounting a shadow of ${real}`);
  return (await client.request('mount', { folder: real })).name;
}

/** Where in the folder the user stands, when that is inside it: the session starts there. */
async function startDir(client: ShadowClient, shadow: string): Promise<string | undefined> {
  const { shadows } = await client.request('list');
  const s = shadows.find((x) => x.name === shadow);
  if (!s) return undefined;
  let here: string;
  try {
    here = fs.realpathSync(process.cwd());
  } catch {
    return undefined;
  }
  for (const root of [s.folder, s.mountPoint]) {
    if (here === root) return '.';
    if (here.startsWith(`${root}/`)) return path.relative(root, here);
  }
  return undefined;
}

async function joinOrStart(
  client: ShadowClient,
  shadow: string,
  target: string,
  agent: string,
  argv: string[],
  args: Args,
): Promise<number> {
  const out = process.stdout;
  const size = (): { cols: number; rows: number } => ({ cols: out.columns || 80, rows: out.rows || 24 });
  let session: ShellInfo | undefined;
  let first: Buffer | undefined;
  if (!args.new) {
    try {
      const joined = await client.request('shell.attach', { shadow, agent });
      session = joined;
      first = Buffer.from(joined.scrollback, 'base64');
      tell(`joining agent ${agent}'s session ${joined.sessionId} (${joined.argv.join(' ')}), started ${joined.startedAt}`);
      if (argv.length > 0) tell('it was started with its own command; --new starts another');
    } catch (err) {
      if (!(err instanceof ShadowError) || err.code !== 'NOT_FOUND') throw err;
    }
  }
  // Output that arrives before the answer of shell.open is kept until the id is known.
  const early: { sessionId: string; data: string }[] = [];
  let exit: { exitCode: number | null; signal: string | null } | undefined;
  let ended: () => void = () => undefined;
  const done = new Promise<void>((r) => (ended = r));
  client.on('shell/output', (p) => {
    if (!session) early.push(p);
    else if (p.sessionId === session.sessionId) out.write(Buffer.from(p.data, 'base64'));
  });
  client.on('shell/exit', (p) => {
    if (session && p.sessionId === session.sessionId) {
      exit = p;
      ended();
    }
  });
  if (!session) {
    const cwd = await startDir(client, shadow);
    session = await client.request('shell.open', {
      shadow,
      agent,
      ...(argv.length > 0 ? { argv } : {}),
      ...(cwd !== undefined ? { cwd } : {}),
      ...size(),
      ...(process.env.TERM ? { term: process.env.TERM } : {}),
      env: args.env,
      ...(args.network ? {} : { noNetwork: true }),
      ...(args.unprotected ? { unprotected: true } : {}),
      ...(args.writable.length > 0 ? { writable: args.writable.map((d) => path.resolve(d)) } : {}),
      ...(args.readable.length > 0 ? { readable: args.readable.map((d) => path.resolve(d)) } : {}),
    });
    tell(`agent ${agent} in shadow ${shadow} (session ${session.sessionId}); your folder is not written until you apply`);
  } else if (first && first.length > 0) out.write(first);
  const id = session.sessionId;
  for (const p of early.splice(0)) if (p.sessionId === id) out.write(Buffer.from(p.data, 'base64'));
  if (!session.running) exit = { exitCode: session.exitCode ?? null, signal: session.signal ?? null };

  // This terminal, joined: raw keys in, resizes followed, until the program ends or the daemon goes.
  const stdin = process.stdin;
  const raw = stdin.isTTY === true;
  const onKeys = (b: Buffer): void =>
    void client.request('shell.input', { sessionId: id, data: b.toString('base64') }).catch(() => undefined);
  const onResize = (): void => void client.request('shell.resize', { sessionId: id, ...size() }).catch(() => undefined);
  let lost = false;
  const onLost = (): void => {
    lost = true;
    ended();
  };
  if (!exit) {
    if (raw) stdin.setRawMode(true);
    stdin.on('data', onKeys);
    stdin.resume();
    out.on('resize', onResize);
    if (session.cols !== size().cols || session.rows !== size().rows) onResize();
    client.onClose(onLost);
    await done;
    stdin.off('data', onKeys);
    out.off('resize', onResize);
    if (raw) stdin.setRawMode(false);
    stdin.pause();
  }
  if (lost || !exit) {
    tell(`the connection to the daemon ended; if it still runs, the session goes on: shadowfs shell ${target} --agent=${agent} joins it`);
    return 1;
  }
  await summary(client, shadow, agent);
  if (exit.signal) return 128 + (signalNumber(exit.signal) ?? 0);
  return exit.exitCode ?? 1;
}

/** What the agent's layer now holds, and the commands to look at it and to take it. */
async function summary(client: ShadowClient, shadow: string, agent: string): Promise<void> {
  try {
    const { changes } = await client.request('layer.changes', { shadow, agent });
    if (changes.length === 0) {
      tell(`agent ${agent} has no changes in ${shadow}`);
      return;
    }
    const shown = changes.slice(0, 10).map((c) => `  ${c.kind.padEnd(8)} ${shownName(c.path)}`);
    if (changes.length > 10) shown.push(`  … and ${changes.length - 10} more`);
    tell(
      [
        `agent ${agent} changed ${changes.length} path${changes.length === 1 ? '' : 's'} in ${shadow} (your folder is untouched):`,
        ...shown,
        `review:  shadowfs diff ${shadow} --agent=${agent}`,
        `apply:   shadowfs apply ${shadow} --agent=${agent}`,
        `commits: shadowfs apply ${shadow} --agent=${agent} --branch NAME   (the agent's git commits, as a branch of yours)`,
        `drop:    shadowfs layer reset ${shadow} ${agent}`,
      ].join('\n'),
    );
  } catch {
    // the summary is a courtesy: the session's status is what matters
  }
}

function signalNumber(name: string): number | undefined {
  const n = os.constants.signals[name as NodeJS.Signals];
  return typeof n === 'number' ? n : undefined;
}
