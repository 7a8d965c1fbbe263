// Checked by dependency-cruiser in `npm run lint`, over the whole workspace:
// - the layers of packages/core/src and packages/redis/src, bottom-up (docs/design.md, "Layers").
//   A module may import its own layer and the layers below it; an import that points up, or any
//   import cycle (type-only imports included), fails the lint stage. To move a file to another
//   layer, change the list here in the same commit, and say why;
// - what users run stands on the product, not on the tests: nothing outside tests/ imports tests/,
//   and the testbed (packages/testbed: the processes, proxies and clients that demos, benchmarks
//   and tests share) is reached by none of the published packages' sources nor the example apps,
//   and itself imports no test runner.
const CORE = '^packages/core/src/';
const REDIS = '^packages/redis/src/';
const TESTBED = '^packages/testbed/';
/** The testbed as an import names it, when the importer has no dependency on it to resolve it by. */
const TESTBED_NAME = '^@mcp-kit/testbed(/|$)';

/** Bottom-up. `paths` are regular expressions under packages/core/src/. */
const CORE_LAYERS = [
  {
    name: 'base',
    holds: 'helpers with no MCP rule in them, and the ports: the contracts of stores, clusters, HTTP and MCP messages',
    paths: ['util/', 'ports/'],
  },
  {
    name: 'rules',
    holds:
      'pure rules and what needs no session: HTTP and JSON-RPC checks, event ids, the in-process stores, both SDK majors as the engine sees them, auth, options, the telemetry hub',
    paths: [
      'http/',
      'events/',
      'tasks/',
      'sdk/',
      'auth/',
      'options\\.ts$',
      'stores\\.ts$',
      'telemetry/(events|hub|otel-conventions)\\.ts$',
    ],
  },
  {
    name: 'streams',
    holds: 'SSE streams of one request or session: priming, frames, connections, closeSSEStream',
    paths: ['streams/', 'telemetry/watch\\.ts$'],
  },
  {
    name: 'session',
    holds: 'a 2025-era session: its server, streams, record, registry, hibernation',
    paths: ['session/'],
  },
  {
    name: 'engine',
    holds: 'the single-instance engine, per era: engine/ (2025 sessions: POST, GET, DELETE, drain) and modern/ (2026-07-28, Tasks)',
    paths: ['engine/', 'modern/'],
  },
  {
    name: 'cluster',
    holds: 'what several instances add (forwarding and shared mode), behind the port engine/cluster-port.ts defines',
    paths: ['cluster/'],
  },
  {
    name: 'entry',
    holds:
      'the handler, the public, node-only and internal entries (and what the internal one reports of a handler), the bridges to node and fetch, the OpenTelemetry plugin',
    paths: [
      'handler\\.ts$',
      'index\\.ts$',
      'internal\\.ts$',
      'node\\.ts$',
      'retained\\.ts$',
      'bridges/',
      'telemetry/(request|otel|otel-metrics|otel-connections)\\.ts$',
    ],
  },
];

/** Bottom-up. `paths` are regular expressions under packages/redis/src/. */
const REDIS_LAYERS = [
  {
    name: 'redis-base',
    holds:
      'what knows no session: the keyspace, the client (one Redis or a Redis Cluster: its slots, its pub/sub) and its Lua scripts, the eviction check, the owner fence, hop signing, the mode options, the HTTP forwarder',
    paths: [
      'keyspace\\.ts$',
      'client\\.ts$',
      'client-repairs\\.ts$',
      'redis-cluster\\.ts$',
      'slots\\.ts$',
      'pubsub/',
      'eviction\\.ts$',
      'fence\\.ts$',
      'hop\\.ts$',
      'mode\\.ts$',
      'forward\\.ts$',
      'script-errors\\.ts$',
    ],
  },
  {
    name: 'redis-stores',
    holds:
      'what one kind of record needs, in either mode: the event store, the task store, the instance registry (heartbeats, the shards of the data), the bus',
    paths: ['events/', 'tasks\\.ts$', 'quota\\.ts$', 'cluster/(registry|shards|bus|directory|legacy)\\.ts$'],
  },
  {
    name: 'redis-modes',
    holds: 'one strategy per cluster mode over the stores: forwarding (owners) and shared (copies), and the contract both implement',
    paths: [
      'cluster/strategy\\.ts$',
      'cluster/forwarding\\.ts$',
      'cluster/owner-scripts\\.ts$',
      'cluster/shared\\.ts$',
      'cluster/copy-scripts\\.ts$',
    ],
  },
  {
    name: 'redis-entry',
    holds: 'RedisSessionCluster (picks the mode once), createRedisScaleOut, the public entry',
    paths: ['cluster\\.ts$', 'scale-out\\.ts$', 'index\\.ts$'],
  },
];

const pathsOf = (src, layers) => layers.flatMap((layer) => layer.paths.map((p) => src + p));

/** One rule per layer: nothing in it imports a layer above it. */
const pointDown = (src, layers) =>
  layers.slice(0, -1).map((layer, i) => ({
    name: `${layer.name}-points-down`,
    comment: `the ${layer.name} layer (${layer.holds}) imports only itself and the layers below it: not ${layers
      .slice(i + 1)
      .map((l) => l.name)
      .join(', ')}`,
    severity: 'error',
    from: { path: pathsOf(src, [layer]) },
    to: { path: pathsOf(src, layers.slice(i + 1)) },
  }));

module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      comment:
        'an import cycle in packages/core/src or packages/redis/src (type-only imports count): break it with a port or a type named by shape',
      severity: 'error',
      from: { path: [CORE, REDIS] },
      to: { circular: true },
    },
    {
      name: 'engine-not-to-cluster',
      comment:
        'the single-instance engine never imports the cluster layer: it asks through the port it defines (engine/cluster-port.ts), which cluster/layer.ts implements',
      severity: 'error',
      from: { path: [CORE + 'engine/', CORE + 'modern/'] },
      to: { path: CORE + 'cluster/' },
    },
    {
      name: 'modes-in-cluster',
      comment:
        "below the cluster layer nothing asks which cluster mode runs: the mode's own ports (ports/owners.ts: forwarding, ports/copies.ts: shared) are for cluster/ alone; the session layer asks through session/copy-rules.ts, the engine through engine/cluster-port.ts",
      severity: 'error',
      from: { path: [CORE + 'session/', CORE + 'engine/', CORE + 'modern/'] },
      to: { path: CORE + 'ports/(owners|copies)\\.ts$' },
    },
    {
      name: 'eras-apart',
      comment:
        'the 2026 engine (modern/) uses of engine/ only what both eras share (the context, the call lifetime, the cluster port), never a 2025 verb',
      severity: 'error',
      from: { path: CORE + 'modern/' },
      to: { path: CORE + 'engine/', pathNot: CORE + 'engine/(context|call-lifetime|cluster-port)\\.ts$' },
    },
    ...pointDown(CORE, CORE_LAYERS),
    {
      name: 'modes-apart',
      comment:
        "the two cluster modes of @mcp-kit/redis share only what is below them (and the contract in cluster/strategy.ts): forwarding's files never import shared mode's, nor the reverse",
      severity: 'error',
      from: { path: REDIS + 'cluster/(forwarding|owner-scripts)\\.ts$' },
      to: { path: REDIS + 'cluster/(shared|copy-scripts)\\.ts$' },
    },
    {
      name: 'modes-apart-too',
      comment: "the two cluster modes of @mcp-kit/redis share only what is below them: shared mode's files never import forwarding's",
      severity: 'error',
      from: { path: REDIS + 'cluster/(shared|copy-scripts)\\.ts$' },
      to: { path: REDIS + 'cluster/(forwarding|owner-scripts)\\.ts$' },
    },
    ...pointDown(REDIS, REDIS_LAYERS),
    {
      name: 'not-into-tests',
      comment:
        'only tests import tests/: a helper that a demo, a benchmark, a script or a package needs belongs in packages/testbed (runner-free), and tests/ keeps what asserts',
      severity: 'error',
      from: { pathNot: '^tests/' },
      to: { path: '^tests/' },
    },
    {
      name: 'testbed-not-in-product',
      comment:
        'the published packages (packages/*/src) and the example apps never import the testbed: it starts processes and proxies for demos, benchmarks and tests, and is never published',
      severity: 'error',
      from: { path: ['^packages/[^/]+/src/', '^apps/'], pathNot: TESTBED },
      to: { path: [TESTBED, TESTBED_NAME] },
    },
    {
      name: 'testbed-runner-free',
      comment:
        'the testbed imports no test runner, so a demo or a benchmark can use it: vitest-aware helpers (assertions, the test name a process is labelled with) live in tests/support',
      severity: 'error',
      from: { path: TESTBED },
      to: { path: 'node_modules/(vitest|@vitest)/' },
    },
    {
      name: 'in-a-layer',
      comment:
        'every module of packages/core/src and packages/redis/src belongs to a layer: add its path to the layers in .dependency-cruiser.cjs',
      severity: 'error',
      from: { path: [CORE, REDIS], pathNot: [...pathsOf(CORE, CORE_LAYERS), ...pathsOf(REDIS, REDIS_LAYERS)] },
      to: {},
    },
    {
      name: 'resolvable',
      comment: 'an import that resolves to no file',
      severity: 'error',
      from: { path: [CORE, REDIS] },
      to: {
        couldNotResolve: true,
        dependencyTypesNot: ['npm', 'npm-dev', 'npm-peer', 'npm-optional', 'core', 'npm-no-pkg', 'npm-unknown'],
      },
    },
  ],
  options: {
    // Type-only imports are dependencies too: a cycle of types is still a cycle for a reader.
    tsPreCompilationDeps: true,
    // The sources import `./x.js` for `./x.ts` (NodeNext); dependency-cruiser maps them as TypeScript
    // does, and follows packages' `exports` (the testbed's map to its sources) as Node does.
    enhancedResolveOptions: {
      extensions: ['.ts', '.js'],
      exportsFields: ['exports'],
      conditionNames: ['types', 'import', 'require', 'node', 'default'],
    },
    doNotFollow: { path: 'node_modules' },
    // The workspace's build outputs are not sources (a package's own dist/ under node_modules is).
    exclude: { path: '^(packages|apps)/.*/(dist|\\.next|\\.turbo)/' },
  },
};
