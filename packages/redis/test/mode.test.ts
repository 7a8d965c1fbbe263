/**
 * The cluster mode is explicit, and an internal URL that cannot work is refused at startup
 * (invariant: configuration-trusted): `internalUrl: process.env.X` with X unset must not make a
 * shared cluster silently, and `http://${process.env.POD_IP}:3000/mcp` with POD_IP unset must not
 * be taken (every forward to the instance would wait and end 502). Every refusal here happens before anything
 * connects: the Redis URL points nowhere.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createRedisScaleOut, RedisSessionCluster } from '@mcp-kit/redis';
import { clusterMode } from '../src/mode.js';

const url = 'redis://127.0.0.1:1';
const unset: string | undefined = process.env.MCP_KIT_TEST_SURELY_UNSET_VARIABLE;

afterEach(() => {
  vi.restoreAllMocks();
});

describe('createRedisScaleOut / RedisSessionCluster refuse what cannot work, naming the option', () => {
  it.each([
    ['an unset environment variable', { internalUrl: unset }, /`internalUrl` is undefined \(an unset environment variable\?\)/],
    ['a template of an unset variable', { internalUrl: `http://${unset}:3000/mcp` }, /names the host "undefined"/],
    ['a template of a null', { internalUrl: `http://${String(null)}:3000/mcp` }, /names the host "null"/],
    ['a template of an empty variable', { internalUrl: `http://${''}:3000/mcp` }, /is not an absolute URL/],
    ['an empty string', { internalUrl: '' }, /`internalUrl` is empty/],
    ['a URL without a scheme', { internalUrl: '10.0.3.7:3000/mcp' }, /is not an absolute URL/],
    ['a host and port only', { internalUrl: 'pod-a:3000/mcp' }, /is not http\(s\)/],
    ['another scheme', { internalUrl: 'ftp://10.0.3.7/mcp' }, /is not http\(s\)/],
    ["mode: 'forward' without internalUrl", { mode: 'forward' as const }, /`internalUrl` is undefined/],
  ])('%s', (_, options, message) => {
    for (const make of [() => createRedisScaleOut({ url, ...options }), () => new RedisSessionCluster({ url, ...options })]) {
      expect(make).toThrow(TypeError);
      expect(make).toThrow(message);
      // Every message names the option and both ways out.
      expect(make).toThrow(/`internalUrl`.*e\.g\. http:\/\/10\.0\.3\.7:3000\/mcp.*`mode: 'shared'`/);
    }
  });

  it("mode: 'shared' with an internalUrl, and an unknown mode", () => {
    expect(() => createRedisScaleOut({ url, mode: 'shared', internalUrl: 'http://10.0.3.7:3000/mcp' })).toThrow(
      /createRedisScaleOut: `mode: 'shared'` takes no `internalUrl`/,
    );
    expect(() => new RedisSessionCluster({ url, mode: 'sticky' as never })).toThrow(
      /RedisSessionCluster: `mode` must be 'forward' or 'shared' \(got "sticky"\)/,
    );
  });
});

describe('clusterMode', () => {
  it('an http(s) URL with a host means forwarding (mode given or not); the URL is normalized', () => {
    expect(clusterMode({ internalUrl: 'http://10.0.3.7:3000/mcp' }, 'x')).toEqual({
      mode: 'forward',
      internalUrl: 'http://10.0.3.7:3000/mcp',
    });
    expect(clusterMode({ mode: 'forward', internalUrl: 'HTTPS://Pod-A.internal/mcp' }, 'x')).toEqual({
      mode: 'forward',
      internalUrl: 'https://pod-a.internal/mcp',
    });
  });

  it("mode: 'shared' without internalUrl is a shared cluster, and says nothing", () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    expect(clusterMode({ mode: 'shared' }, 'x')).toEqual({ mode: 'shared', internalUrl: '' });
    expect(warn).not.toHaveBeenCalled();
  });

  it('neither mode nor internalUrl: still a shared cluster (existing users keep working), with one deprecation warning per process', async () => {
    vi.resetModules();
    const fresh = (await import('../src/mode.js')).clusterMode;
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    expect(fresh({}, 'createRedisScaleOut')).toEqual({ mode: 'shared', internalUrl: '' });
    expect(fresh({}, 'createRedisScaleOut')).toEqual({ mode: 'shared', internalUrl: '' });
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0]![0]).toMatch(/createRedisScaleOut: neither `mode` nor `internalUrl` given.*`mode: 'shared'`/);
    expect(warn.mock.calls[0]![1]).toEqual({ type: 'DeprecationWarning', code: 'MCP_KIT_IMPLICIT_SHARED_CLUSTER' });
  });
});
