import { describe, expect, it } from 'vitest';
import {
  checkAccept,
  checkContentType,
  checkHostAndOrigin,
  checkMethod,
  checkProtocolVersion,
  ErrorCode,
  type HostCheck,
  type Verdict,
} from '@mcp-kit/core/internal';
import { header, hostName, isLoopbackAddress, LOCAL_HOSTS } from '../src/http/rules.js';

const OK = { ok: true };

/** Asserts a rejection with this status, code and a message that contains every fragment. */
function expectReject(v: Verdict, status: number, code: number, ...fragments: string[]): void {
  expect(v.ok).toBe(false);
  if (v.ok) return;
  expect(v.status).toBe(status);
  expect(v.code).toBe(code);
  for (const f of fragments) expect(v.message).toContain(f);
}

describe('checkMethod', () => {
  it('accepts POST, GET and DELETE on a stateful endpoint', () => {
    for (const m of ['POST', 'GET', 'DELETE']) expect(checkMethod(m, false)).toEqual(OK);
  });

  it('answers other methods with 405 and an Allow header', () => {
    for (const m of ['PUT', 'PATCH', 'OPTIONS', 'HEAD']) {
      const v = checkMethod(m, false);
      expect(v).toEqual({
        ok: false,
        status: 405,
        code: ErrorCode.ServerError,
        message: `Method not allowed: ${m}. Use GET, POST, DELETE.`,
        headers: { allow: 'GET, POST, DELETE' },
      });
    }
  });

  it('accepts only POST on a stateless endpoint, and says why GET/DELETE are refused', () => {
    expect(checkMethod('POST', true)).toEqual(OK);
    for (const m of ['GET', 'DELETE']) {
      expect(checkMethod(m, true)).toEqual({
        ok: false,
        status: 405,
        code: -32000,
        message: `Method not allowed: ${m} (this endpoint is stateless). Use POST.`,
        headers: { allow: 'POST' },
      });
    }
    expect(checkMethod('PUT', true)).toMatchObject({
      status: 405,
      message: 'Method not allowed: PUT. Use POST.',
      headers: { allow: 'POST' },
    });
  });

  it('is case-sensitive, as HTTP methods are', () => {
    expectReject(checkMethod('post', false), 405, -32000, 'Method not allowed: post');
  });
});

describe('checkAccept', () => {
  const GET_MSG = 'Not Acceptable: a GET must accept text/event-stream';
  const POST_MSG = 'Not Acceptable: a POST must accept both application/json and text/event-stream';

  it('GET needs text/event-stream', () => {
    expect(checkAccept('GET', 'text/event-stream')).toEqual(OK);
    expect(checkAccept('GET', 'application/json, text/event-stream')).toEqual(OK);
    expect(checkAccept('GET', 'text/*')).toEqual(OK);
    expect(checkAccept('GET', '*/*')).toEqual(OK);
    expect(checkAccept('GET', 'TEXT/Event-Stream')).toEqual(OK);
  });

  it('GET without text/event-stream is 406', () => {
    for (const accept of [undefined, '', 'application/json', 'text/html', 'text/event-streams', 'application/*']) {
      expect(checkAccept('GET', accept)).toEqual({ ok: false, status: 406, code: -32000, message: GET_MSG });
    }
  });

  it('POST needs both application/json and text/event-stream', () => {
    expect(checkAccept('POST', 'application/json, text/event-stream')).toEqual(OK);
    expect(checkAccept('POST', 'text/event-stream,application/json')).toEqual(OK);
    expect(checkAccept('POST', '*/*')).toEqual(OK);
    expect(checkAccept('POST', 'application/*, text/*')).toEqual(OK);
    expect(checkAccept('POST', 'application/json, text/*')).toEqual(OK);
  });

  it('ignores media-type parameters such as q and charset', () => {
    expect(checkAccept('POST', 'application/json;q=0.9, text/event-stream;q=0.8')).toEqual(OK);
    expect(checkAccept('POST', 'application/json; charset=utf-8 , text/event-stream ; q=1')).toEqual(OK);
    expect(checkAccept('GET', 'text/event-stream;q=0.5')).toEqual(OK);
  });

  it('POST with only one of the two is 406', () => {
    for (const accept of [
      undefined,
      '',
      'application/json',
      'text/event-stream',
      'application/*',
      'text/*',
      'application/json, text/html',
    ]) {
      expect(checkAccept('POST', accept)).toEqual({ ok: false, status: 406, code: -32000, message: POST_MSG });
    }
  });
});

describe('checkContentType', () => {
  it('accepts application/json with or without parameters, any case', () => {
    for (const ct of ['application/json', 'application/json; charset=utf-8', 'Application/JSON;charset=UTF-8', ' application/json ']) {
      expect(checkContentType(ct)).toEqual(OK);
    }
  });

  it('answers other media types with 415 and names what it got', () => {
    expect(checkContentType('text/plain')).toEqual({
      ok: false,
      status: 415,
      code: -32000,
      message: 'Unsupported Media Type: Content-Type must be application/json, got "text/plain"',
    });
    expectReject(checkContentType('application/json-seq'), 415, -32000, 'got "application/json-seq"');
    expectReject(checkContentType('application/x-www-form-urlencoded'), 415, -32000, 'must be application/json');
  });

  it('answers a missing Content-Type with 415 "got none"', () => {
    expect(checkContentType(undefined)).toEqual({
      ok: false,
      status: 415,
      code: -32000,
      message: 'Unsupported Media Type: Content-Type must be application/json, got none',
    });
    expectReject(checkContentType(''), 415, -32000, 'got none');
  });
});

describe('checkProtocolVersion', () => {
  const supported = ['2025-11-25', '2025-06-18', '2025-03-26'];

  it('accepts a missing header (the spec says assume a default) and any supported version', () => {
    expect(checkProtocolVersion(undefined, supported)).toEqual(OK);
    for (const v of supported) expect(checkProtocolVersion(v, supported)).toEqual(OK);
  });

  it('answers an unsupported version with 400 that lists the supported ones', () => {
    expect(checkProtocolVersion('1999-01-01', supported)).toEqual({
      ok: false,
      status: 400,
      code: -32000,
      message: 'Unsupported MCP-Protocol-Version: "1999-01-01". Supported: 2025-11-25, 2025-06-18, 2025-03-26',
    });
    expectReject(checkProtocolVersion('', supported), 400, -32000, 'Unsupported MCP-Protocol-Version: ""');
    expectReject(checkProtocolVersion('2025-11-25 ', supported), 400, -32000, '"2025-11-25 "');
  });
});

describe('checkHostAndOrigin', () => {
  const local: HostCheck = { allowedHosts: LOCAL_HOSTS, allowedOrigins: LOCAL_HOSTS };
  const hostMsg = (h: string) => `Forbidden: Host ${JSON.stringify(h)} is not allowed (DNS-rebinding protection; see allowedHosts)`;
  const originMsg = (o: string) => `Forbidden: Origin ${JSON.stringify(o)} is not allowed (DNS-rebinding protection; see allowedOrigins)`;

  it('accepts local hosts with and without a port, any case', () => {
    for (const host of ['localhost', 'localhost:3000', 'LOCALHOST:3000', '127.0.0.1', '127.0.0.1:8080', '[::1]', '[::1]:3000']) {
      expect(checkHostAndOrigin(host, undefined, local), host).toEqual(OK);
    }
  });

  it('answers a foreign or missing Host with 403 that names it', () => {
    for (const host of ['evil.com', 'evil.com:3000', 'localhost.evil.com', 'evil.localhost:3000', '127.0.0.2', '[::2]:3000', '']) {
      expect(checkHostAndOrigin(host, undefined, local), host).toEqual({ ok: false, status: 403, code: -32000, message: hostMsg(host) });
    }
    expect(checkHostAndOrigin(undefined, undefined, local)).toEqual({ ok: false, status: 403, code: -32000, message: hostMsg('') });
  });

  it('checks Host before Origin', () => {
    expectReject(checkHostAndOrigin('evil.com', 'http://localhost:3000', local), 403, -32000, 'Host "evil.com"');
  });

  it('accepts a local Origin matched by host name, with any scheme and port', () => {
    for (const origin of [
      'http://localhost:3000',
      'https://localhost',
      'http://127.0.0.1:5173',
      'http://[::1]:3000',
      'HTTP://LOCALHOST:3000',
    ]) {
      expect(checkHostAndOrigin('localhost:3000', origin, local), origin).toEqual(OK);
    }
  });

  it('accepts a missing Origin (non-browser clients) and the opaque "null" origin', () => {
    expect(checkHostAndOrigin('localhost:3000', undefined, local)).toEqual(OK);
    expect(checkHostAndOrigin('localhost:3000', 'null', local)).toEqual(OK);
  });

  it('answers a foreign Origin with 403 that names it', () => {
    for (const origin of ['http://evil.com', 'https://evil.com:3000', 'http://localhost.evil.com', 'http://127.0.0.1.nip.io']) {
      expect(checkHostAndOrigin('localhost:3000', origin, local), origin).toEqual({
        ok: false,
        status: 403,
        code: -32000,
        message: originMsg(origin),
      });
    }
  });

  it('answers a malformed Origin with 403 "malformed"', () => {
    for (const origin of ['not a url', 'http://', '://localhost', '']) {
      expect(checkHostAndOrigin('localhost:3000', origin, local), origin).toEqual({
        ok: false,
        status: 403,
        code: -32000,
        message: `Forbidden: malformed Origin ${JSON.stringify(origin)}`,
      });
    }
  });

  it('matches full origins exactly (scheme and port), ignoring a trailing slash and case', () => {
    const check: HostCheck = {
      allowedHosts: ['localhost', 'app.example.com'],
      allowedOrigins: ['https://app.example.com', 'http://localhost:3000'],
    };
    expect(checkHostAndOrigin('app.example.com', 'https://app.example.com', check)).toEqual(OK);
    expect(checkHostAndOrigin('app.example.com', 'https://app.example.com/', check)).toEqual(OK);
    expect(checkHostAndOrigin('app.example.com', 'HTTPS://App.Example.com', check)).toEqual(OK);
    expect(checkHostAndOrigin('localhost:3000', 'http://localhost:3000', check)).toEqual(OK);
    // Another scheme or port is another origin.
    expectReject(
      checkHostAndOrigin('app.example.com', 'http://app.example.com', check),
      403,
      -32000,
      'Origin "http://app.example.com" is not allowed',
    );
    expectReject(
      checkHostAndOrigin('localhost:3000', 'http://localhost:4000', check),
      403,
      -32000,
      'Origin "http://localhost:4000" is not allowed',
    );
  });

  it('uses only the configured hosts', () => {
    const check: HostCheck = { allowedHosts: ['mcp.internal'], allowedOrigins: ['mcp.internal'] };
    expect(checkHostAndOrigin('mcp.internal:8443', 'https://mcp.internal:8443', check)).toEqual(OK);
    expectReject(checkHostAndOrigin('localhost', undefined, check), 403, -32000, 'Host "localhost"');
    expectReject(checkHostAndOrigin('mcp.internal', 'http://localhost', check), 403, -32000, 'Origin "http://localhost"');
  });
});

describe('hostName, header, isLoopbackAddress', () => {
  it('hostName strips the port and lower-cases, keeping IPv6 brackets', () => {
    expect(hostName('LocalHost:3000')).toBe('localhost');
    expect(hostName(' example.com ')).toBe('example.com');
    expect(hostName('[::1]:3000')).toBe('[::1]');
    expect(hostName('[::1]')).toBe('[::1]');
    expect(hostName('127.0.0.1:80')).toBe('127.0.0.1');
  });

  it('header joins repeated values', () => {
    expect(header({ accept: ['application/json', 'text/event-stream'] }, 'accept')).toBe('application/json, text/event-stream');
    expect(header({ accept: 'text/event-stream' }, 'accept')).toBe('text/event-stream');
    expect(header({}, 'accept')).toBeUndefined();
  });

  it('isLoopbackAddress recognizes IPv4, IPv6 and mapped loopback only', () => {
    for (const a of ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1']) expect(isLoopbackAddress(a), a).toBe(true);
    for (const a of [undefined, '', '10.0.0.1', '::ffff:10.0.0.1', '0.0.0.0', '::']) expect(isLoopbackAddress(a), String(a)).toBe(false);
  });
});

describe('Accept with q=0', () => {
  it('treats q=0 as not acceptable', async () => {
    const { checkAccept } = await import('../src/http/rules.js');
    expect(checkAccept('GET', 'text/event-stream;q=0').ok).toBe(false);
    expect(checkAccept('GET', 'text/event-stream; q=0.1').ok).toBe(true);
    expect(checkAccept('POST', 'application/json, text/event-stream;q=0').ok).toBe(false);
  });
});
