#!/usr/bin/env node
// Every `@example` in the packages' TSDoc is a copy of a region of a `*.examples.ts` file that the
// workspace typecheck compiles, so an example cannot drift from the API it shows.
//
//   node scripts/examples.mjs          check: exit 1 if an example differs from its region, names a
//                                      region that does not exist, or has no source at all
//   node scripts/examples.mjs --write  copy each region into the comment that names it
//
// In a comment:   * @example
//                 * ```ts source="../examples/core.examples.ts#createMcpHandler"
//                 * …the region's lines…
//                 * ```
// In the file:    //#region createMcpHandler … //#endregion createMcpHandler
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const write = process.argv.includes('--write');
const FENCE = /^(\s*)\* ```ts source="([^"#]+)#([^"]+)"\s*$/;
const CLOSE = /^\s*\* ```\s*$/;

function sources(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    // Build output (.next, dist) and dependencies hold generated comments, not ours.
    if (name.startsWith('.') || name === 'node_modules' || name === 'dist') continue;
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...sources(full));
    else if (name.endsWith('.ts')) out.push(full);
  }
  return out;
}

function region(file, name) {
  const lines = readFileSync(file, 'utf8').split('\n');
  const start = lines.findIndex((l) => l.trim() === `//#region ${name}`);
  const end = lines.findIndex((l, i) => i > start && l.trim() === `//#endregion ${name}`);
  if (start === -1 || end === -1) return undefined;
  const body = lines.slice(start + 1, end);
  const indent = Math.min(...body.filter((l) => l.trim() !== '').map((l) => l.length - l.trimStart().length));
  return body.map((l) => l.slice(indent));
}

const problems = [];
let checked = 0;
for (const pkg of readdirSync(path.join(ROOT, 'packages'))) {
  const src = path.join(ROOT, 'packages', pkg, 'src');
  if (!statSync(path.join(ROOT, 'packages', pkg)).isDirectory()) continue;
  let files;
  try {
    files = sources(src);
  } catch {
    continue;
  }
  for (const file of files) {
    const lines = readFileSync(file, 'utf8').split('\n');
    let changed = false;
    for (let i = 0; i < lines.length; i++) {
      const where = `${path.relative(ROOT, file)}:${i + 1}`;
      if (/^\s*\* @example\b/.test(lines[i]) && !FENCE.test(lines[i + 1] ?? '')) {
        problems.push(`${where}: @example without a \`\`\`ts source="…#region" fence (it would not be compiled)`);
        continue;
      }
      const m = FENCE.exec(lines[i]);
      if (!m) continue;
      const [, indent, rel, name] = m;
      const end = lines.findIndex((l, j) => j > i && CLOSE.test(l));
      if (end === -1) {
        problems.push(`${where}: unclosed example fence`);
        continue;
      }
      const wanted = region(path.resolve(path.dirname(file), rel), name);
      if (!wanted) {
        problems.push(`${where}: no region "${name}" in ${rel}`);
        continue;
      }
      checked++;
      const rendered = wanted.map((l) => (l === '' ? `${indent}*` : `${indent}* ${l}`));
      const current = lines.slice(i + 1, end);
      if (current.join('\n') === rendered.join('\n')) continue;
      if (write) {
        lines.splice(i + 1, end - i - 1, ...rendered);
        changed = true;
      } else problems.push(`${where}: example differs from ${rel}#${name} (run node scripts/examples.mjs --write)`);
    }
    if (changed) writeFileSync(file, lines.join('\n'));
  }
}
for (const p of problems) console.error(`✗ ${p}`);
console.log(`${checked} examples checked against their compiled regions${problems.length ? `, ${problems.length} problems` : ''}`);
process.exit(problems.length ? 1 : 0);
