// `node src/auth-cost.mjs`: CPU per request of the resource server's check, in process: a JWT
// verified in full (`cacheMs: 0`) and one whose verification is reused (the default), against the
// local JWKS of this process.
// Run beside `pnpm bench` (whose kit-express-auth row measures the whole request): this isolates
// the check itself, in CPU time, which a busy machine does not distort the way it does a rate.
import { createServer } from 'node:http';
import { createMcpHandler, jwtVerifier } from '@mcp-kit/core';
import { benchAuth } from './servers/auth.mjs';

const server = createServer();
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const port = server.address().port;
const auth = benchAuth({ host: '127.0.0.1', port });
server.on('request', (req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(auth.jwks)));
const token = await auth.token();
const url = new URL(`http://127.0.0.1:${port}/mcp`);
for (const cacheMs of [0, 60_000]) {
  const verifier = jwtVerifier({ issuer: `http://127.0.0.1:${port}`, jwksUri: `http://127.0.0.1:${port}/bench/jwks`, cacheMs });
  const handler = createMcpHandler({
    server: () => {
      throw new Error('unused');
    },
    auth: { ...auth.options, verifier },
  });
  const rs = handler.options.auth;
  // As the node bridge says it: the listener's address and port, of which the resource is made.
  const req = () => ({
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, host: url.host },
    url,
    localAddress: '127.0.0.1',
    localPort: port,
    readBody: async () => ({ ok: true, text: '' }),
  });
  for (let i = 0; i < 3000; i++) if (!(await rs.authenticate(req())).ok) throw new Error('refused');
  const n = 20_000;
  const cpu = process.cpuUsage();
  for (let i = 0; i < n; i++) await rs.authenticate(req());
  const used = process.cpuUsage(cpu);
  console.log(`cacheMs ${cacheMs}: ${((used.user + used.system) / n).toFixed(1)} µs of CPU per request`);
}
server.close();
