#!/usr/bin/env node
// `node src/profile-summary.mjs <file.cpuprofile> [µs per unit] [top]`
//
// Summarizes a V8 CPU profile written by `pnpm bench --cpu-prof`: self time by bucket (node:http
// and Node internals, the web framework, SDK v1, SDK v2 and its hono bridge, zod, ajv, mcp-kit
// core and adapters, GC), then the functions with the most self and total time. Native frames
// (JSON.parse, Map#set...) have no script, so their time goes to the JavaScript function that
// called them. Given the server CPU per call (or per event) the workload measured, each bucket is
// also shown in µs per unit.
import { readFileSync } from 'node:fs';

const FRAMEWORK =
  /node_modules\/(?:\.pnpm\/)?(?:koa[\w-]*|@koa|express|router|body-parser|finalhandler|on-finished|parseurl|path-to-regexp|send|serve-static|accepts|type-is|content-type|cookies|statuses|http-errors|delegates|vary|fresh|negotiator|qs|proxy-addr|depd|debug)[@/]/;

function bucketOf(url, name) {
  if (name === '(garbage collector)') return 'GC';
  if (name === '(idle)' || name === '(program)' || name === '(root)') return name;
  if (!url) return undefined;
  if (url.includes('/@modelcontextprotocol/sdk/') || url.includes('@modelcontextprotocol+sdk')) return 'SDK v1';
  if (/\/@modelcontextprotocol\/(?:server|core|node|express)\//.test(url)) return 'SDK v2';
  if (url.includes('/@hono/node-server/') || url.includes('/hono/')) return 'hono (SDK v2 node bridge)';
  if (url.includes('/ajv/') || url.includes('/ajv-formats/')) return 'ajv';
  if (url.includes('/zod/')) return 'zod';
  if (url.includes('/packages/core/')) return 'mcp-kit core';
  if (/\/packages\/(express|koa|next)\//.test(url)) return 'mcp-kit adapter';
  if (url.startsWith('node:')) return 'node';
  if (FRAMEWORK.test(url)) return 'framework';
  if (url.includes('/packages/bench/') || url.includes('/packages/fixtures/')) return 'bench server and fixture';
  return 'other';
}

const [file, perUnitArg, topArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: node src/profile-summary.mjs <file.cpuprofile> [µs per unit] [top]');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8'));
const perUnit = perUnitArg === undefined ? undefined : Number(perUnitArg);
const top = Number(topArg ?? 25);

const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parentOf = new Map();
for (const n of profile.nodes) for (const child of n.children ?? []) parentOf.set(child, n.id);

const buckets = new Map();
function bucket(id) {
  if (buckets.has(id)) return buckets.get(id);
  const n = nodes.get(id);
  let b = bucketOf(n.callFrame.url, n.callFrame.functionName);
  if (b === undefined) {
    const parent = parentOf.get(id);
    b = parent === undefined ? 'other' : bucket(parent);
    if (b === '(root)') b = 'other';
  }
  buckets.set(id, b);
  return b;
}

const label = (n) => `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.replace(/^.*\//, '')}:${n.callFrame.lineNumber + 1}`;
const selfByNode = new Map();
let total = 0;
for (let i = 0; i < profile.samples.length; i++) {
  const dt = profile.timeDeltas[i + 1] ?? 0;
  selfByNode.set(profile.samples[i], (selfByNode.get(profile.samples[i]) ?? 0) + dt);
  total += dt;
}
const byBucket = new Map();
const selfByFn = new Map();
const totalByFn = new Map();
const add = (map, key, t) => map.set(key, (map.get(key) ?? 0) + t);
for (const [id, t] of selfByNode) {
  const b = bucket(id);
  add(byBucket, b, t);
  add(selfByFn, `${label(nodes.get(id))} [${b}]`, t);
  const seen = new Set();
  for (let at = id; at !== undefined; at = parentOf.get(at)) {
    const l = label(nodes.get(at));
    if (!seen.has(l)) add(totalByFn, l, t);
    seen.add(l);
  }
}
const busy = total - (byBucket.get('(idle)') ?? 0);
const row = (t) =>
  `${(t / 1000).toFixed(0).padStart(7)} ms ${((100 * t) / busy).toFixed(1).padStart(5)}%${perUnit === undefined ? '' : `${((t / busy) * perUnit).toFixed(2).padStart(8)} µs`}`;
const sorted = (map) => [...map].sort((a, b) => b[1] - a[1]);

console.log(
  `${file}: ${(busy / 1000).toFixed(0)} ms busy of ${(total / 1000).toFixed(0)} ms; shares of busy time${perUnit === undefined ? '' : `, and of ${perUnit} µs per unit`}`,
);
console.log('\nself time by bucket');
for (const [b, t] of sorted(byBucket)) if (b !== '(idle)') console.log(`${row(t)}  ${b}`);
console.log(`\ntop ${top} by self time`);
for (const [l, t] of sorted(selfByFn)
  .filter(([l]) => !l.startsWith('(idle)'))
  .slice(0, top))
  console.log(`${row(t)}  ${l}`);
console.log(`\ntop ${top} by total time`);
for (const [l, t] of sorted(totalByFn)
  .filter(([l]) => !l.startsWith('(idle)') && !l.startsWith('(root)'))
  .slice(0, top))
  console.log(`${row(t)}  ${l}`);
