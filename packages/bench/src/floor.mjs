#!/usr/bin/env node
// `node src/floor.mjs [seconds] [v1|v2]`
//
// What the SDK's McpServer costs with no HTTP at all: the bench server (servers/tools.mjs, or with
// `v2` the SDK v2 one in servers/tools-v2.mjs) on that SDK's InMemoryTransport, driven by raw
// JSON-RPC messages. Prints CPU µs per tools/call of the
// throughput workload's tool (16 sessions, 64 calls in flight) and per notification of the burst
// workload's tool. Every transport on top of McpServer pays at least this; the numbers include
// the in-memory client's small share and the GC of both.
import { setImmediate as turn } from 'node:timers/promises';
import { InMemoryTransport as InMemoryTransportV1 } from '@modelcontextprotocol/sdk/inMemory.js';
import { InMemoryTransport as InMemoryTransportV2 } from '@modelcontextprotocol/server';
import { createBenchServer } from './servers/tools.mjs';
import { createBenchServerV2 } from './servers/tools-v2.mjs';

const seconds = Number(process.argv[2] ?? 5);
const sdk = process.argv[3] === 'v2' ? 'v2' : 'v1';
const InMemoryTransport = sdk === 'v2' ? InMemoryTransportV2 : InMemoryTransportV1;
const createServer = sdk === 'v2' ? createBenchServerV2 : createBenchServer;

async function connect() {
  const [client, server] = InMemoryTransport.createLinkedPair();
  await createServer('floor').connect(server);
  const waiting = new Map();
  let nextId = 1;
  client.onmessage = (message) => {
    const resolve = waiting.get(message.id);
    if (resolve === undefined) return; // a notification
    waiting.delete(message.id);
    resolve(message);
  };
  await client.start();
  const request = (method, params) =>
    new Promise((resolve) => {
      const id = nextId++;
      waiting.set(id, resolve);
      void client.send({ jsonrpc: '2.0', id, method, params });
    });
  await request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'floor', version: '0.0.0' } });
  await client.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  return request;
}

const cpuUs = (since) => {
  const u = process.cpuUsage(since);
  return u.user + u.system;
};

async function toolsCall() {
  const sessions = await Promise.all(Array.from({ length: 16 }, connect));
  let stopping = false;
  let counting = false;
  let calls = 0;
  const worker = async (i) => {
    const request = sessions[i % sessions.length];
    for (let n = 1; !stopping; n++) {
      const r = await request('tools/call', { name: 'test_simple_text', arguments: {} });
      if (!r.result) throw new Error(`tools/call failed: ${JSON.stringify(r)}`);
      if (counting) calls++;
      // The in-memory transport answers within microtasks: let timers run now and then.
      if (n % 128 === 0) await turn();
    }
  };
  const workers = Array.from({ length: 64 }, (_, i) => worker(i));
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  counting = true;
  const since = process.cpuUsage();
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  counting = false;
  const used = cpuUs(since);
  stopping = true;
  await Promise.all(workers);
  return used / calls;
}

async function burst(count = 20_000, runs = 12, warmups = 2) {
  const request = await connect();
  const perEvent = [];
  for (let i = 0; i < warmups + runs; i++) {
    const since = process.cpuUsage();
    await request('tools/call', { name: 'bench_burst', arguments: { count } });
    if (i >= warmups) perEvent.push(cpuUs(since) / count);
  }
  perEvent.sort((a, b) => a - b);
  return perEvent[perEvent.length >> 1];
}

console.log(`SDK ${sdk} McpServer on InMemoryTransport, node ${process.version}`);
console.log(`tools/call test_simple_text: ${(await toolsCall()).toFixed(1)} µs CPU per call`);
console.log(`bench_burst notification:    ${(await burst()).toFixed(2)} µs CPU per notification (median)`);
