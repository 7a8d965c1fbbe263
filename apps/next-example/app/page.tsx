export default function Home() {
  return (
    <main>
      <h1>mcp-kit Next.js example</h1>
      <p>
        An MCP server (Streamable HTTP, SEP-1699 polling) is served at <code>/mcp</code>.
      </p>
    </main>
  );
}
