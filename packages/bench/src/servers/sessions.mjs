// The per-session routing the SDK's own SEP-1699 examples use, in both majors: one transport and
// one McpServer per session, kept in a Map by session id; a request without a session must be an
// initialize. Only the transport class and the server differ between the majors.

/**
 * Mounts `/mcp` on `app`. `newTransport(onsessioninitialized)` builds a session's transport,
 * `newServer()` its McpServer. Returns the sessions by id.
 */
export function serveSessions(app, { newTransport, newServer }) {
  const sessions = new Map();
  app.all('/mcp', async (req, res) => {
    const sessionId = req.headers['mcp-session-id'];
    const transport = sessionId ? sessions.get(sessionId) : undefined;
    if (transport) {
      await transport.handleRequest(req, res, req.body);
      return;
    }
    if (sessionId) {
      res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
      return;
    }
    if (!req.body || req.body.method !== 'initialize') {
      res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null });
      return;
    }
    const created = newTransport((id) => sessions.set(id, created));
    created.onclose = () => {
      if (created.sessionId) sessions.delete(created.sessionId);
    };
    await newServer().connect(created);
    await created.handleRequest(req, res, req.body);
  });
  return sessions;
}
