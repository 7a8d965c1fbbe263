/**
 * The vitest projects (tests/projects.ts) split the test files without loss or overlap: `npm test`
 * runs every project, so a file in none would never run and a file in two would run twice.
 * Asked of vitest itself, with the repository's own config.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createVitest } from 'vitest/node';
import { BUILD, PACKAGES_REDIS, RANDOM, UNIT } from './projects.js';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Every `*.test.ts` under tests/ and packages/{name}/test/, by walking the tree. */
function testFiles(): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory() && entry.name !== 'node_modules') walk(path);
      else if (entry.name.endsWith('.test.ts')) found.push(path);
    }
  };
  walk('tests');
  for (const pkg of readdirSync(join(root, 'packages'))) if (existsSync(join(root, 'packages', pkg, 'test'))) walk(`packages/${pkg}/test`);
  return found.sort();
}

describe('the vitest projects', () => {
  it('name only test files that exist, each in one list', () => {
    const listed = [...UNIT, ...BUILD, ...PACKAGES_REDIS, ...RANDOM];
    expect(listed.filter((file) => !existsSync(join(root, file)))).toEqual([]);
    expect(listed.filter((file, i) => listed.indexOf(file) !== i)).toEqual([]);
  });

  it('hold every test file exactly once', async () => {
    // The whole split, not what this run's lane leaves to others (vitest.config.ts reads it).
    const laneExcludes = process.env.MCP_KIT_TEST_EXCLUDE;
    delete process.env.MCP_KIT_TEST_EXCLUDE;
    const vitest = await createVitest('test', { config: join(root, 'vitest.config.ts'), watch: false, root });
    if (laneExcludes !== undefined) process.env.MCP_KIT_TEST_EXCLUDE = laneExcludes;
    try {
      const specs = await vitest.globTestSpecifications();
      const projectsOf = new Map<string, string[]>();
      for (const spec of specs) {
        const file = relative(root, spec.moduleId);
        projectsOf.set(file, [...(projectsOf.get(file) ?? []), spec.project.name]);
      }
      const misplaced = testFiles()
        .map((file) => ({ file, projects: projectsOf.get(file) ?? [] }))
        .filter(({ projects }) => projects.length !== 1);
      expect(misplaced).toEqual([]);
      expect(Object.fromEntries(['unit', 'build', 'redis', 'random'].map((p) => [p, specs.some((s) => s.project.name === p)]))).toEqual({
        unit: true,
        build: true,
        redis: true,
        random: true,
      });
    } finally {
      await vitest.close();
    }
  });
});
