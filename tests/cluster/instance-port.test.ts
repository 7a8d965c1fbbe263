/**
 * The test harness's instances on a port another process took between `freePort()` and their start
 * (vitest runs files in parallel workers): the example app must not claim to listen (Express 5
 * calls `listen`'s callback with the error), and a first start moves to another port. Otherwise the
 * app prints its ready line and exits, and a whole suite talks to another worker's instance.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { instance, type Instance } from '@mcp-kit/testbed/cluster';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it('an instance whose port is taken at its first start moves to a free one and serves there', async () => {
  const squatter = createServer((_req, res) => res.writeHead(418, { 'x-served-by': 'squatter' }).end());
  await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => squatter.close(() => resolve())));
  const taken = (squatter.address() as AddressInfo).port;
  const inst: Instance = instance('moved', taken, { LIVE_PAGE: '0' });
  cleanups.push(() => inst.stop('SIGKILL'));
  await inst.start();
  expect(inst.output).toContain(`cannot listen on 127.0.0.1:${taken}`);
  expect(inst.port).not.toBe(taken);
  const res = await fetch(inst.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  expect(res.headers.get('x-served-by')).toBe('moved');
});
