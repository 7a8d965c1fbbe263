/**
 * The list of documented commands (scripts/doc-commands.mjs) against the docs: what the `doc
 * commands` stage of `npm test` checks before it runs them.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error a script of the repository, not a typed module
import { COMMANDS, documentedCommands, listProblems } from '../../scripts/doc-commands.mjs';

type Documented = { command: string; where: string };

describe('the commands the docs show', () => {
  it('every command in a shell block of the README, docs/ and the package READMEs is listed with how npm test runs it, and every listed one is shown', () => {
    expect(listProblems()).toEqual([]);
    const commands = (documentedCommands() as Documented[]).map((d) => d.command);
    expect(commands).toContain('npm run demo');
    expect(commands).toContain('npm test');
    expect(Object.keys(COMMANDS as Record<string, unknown>).sort()).toEqual([...new Set(commands)].sort());
  });

  it('reads each line of a shell block, strips a trailing comment, joins continued lines, and skips other blocks', () => {
    const dir = mkdtempSync(join(tmpdir(), 'doc-commands-'));
    const file = join(dir, 'page.md');
    const fence = '```';
    writeFileSync(
      file,
      [
        '# A page',
        `${fence}sh`,
        'npm run demo   # what it does',
        '# a comment line',
        '',
        'pnpm demo:cluster \\',
        '  --once',
        fence,
        `${fence}ts`,
        'const notACommand = 1;',
        fence,
        `${fence}bash`,
        'pnpm demo:new-thing',
        fence,
      ].join('\n'),
    );
    const found = documentedCommands([file]) as Documented[];
    expect(found.map((d) => d.command)).toEqual(['npm run demo', 'pnpm demo:cluster --once', 'pnpm demo:new-thing']);
    expect(found[2]!.where).toBe(`${file}:13`);
    // A command no entry says how to run fails the check, naming where it is.
    const problems = listProblems(found) as string[];
    expect(problems.filter((p) => p.includes('pnpm demo:new-thing'))).toEqual([
      `${file}:13: \`pnpm demo:new-thing\` is not in scripts/doc-commands.mjs: say there how npm test runs it (run, serve or covered)`,
    ]);
    // …and so does every listed command this page does not show.
    expect(problems.some((p) => p.includes('`npm test` is listed in scripts/doc-commands.mjs but no doc shows it'))).toBe(true);
  });
});
