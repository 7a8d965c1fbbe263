/**
 * The client half of the OAuth end-to-end tests: an `OAuthClientProvider`, the interface both SDK
 * majors' transports drive (v1 `@modelcontextprotocol/sdk`, v2 `@modelcontextprotocol/client`),
 * implemented as an app would: it registers itself dynamically, keeps what the SDK hands it (client
 * information, PKCE verifier, tokens) in memory, and "redirects the user" by giving the
 * authorization URL to a {@link Browser}, which follows the authorization server's redirects to the
 * callback URL. The test then hands the callback's code to `transport.finishAuth`, as an app's
 * redirect handler would.
 */
import type { OAuthDiscoveryState, OAuthClientProvider as V1OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import type { Browser } from './auth-server.js';

/** Where the authorization server sends the user back; the Browser stops there and never fetches it. */
export const REDIRECT_URI = 'http://127.0.0.1/oauth/callback';

export class TestOAuthClient implements V1OAuthClientProvider {
  /** Every authorization URL the SDK sent the user to, in order. */
  readonly authorizationUrls: URL[] = [];
  /** Every token set the SDK saved, in order. */
  readonly savedTokens: OAuthTokens[] = [];
  private client: OAuthClientInformationMixed | undefined;
  private current: OAuthTokens | undefined;
  private verifier: string | undefined;
  private callback: Promise<URL> | undefined;
  private discovery: OAuthDiscoveryState | undefined;

  constructor(
    private readonly browser: Browser,
    private readonly name = 'mcp-kit e2e client',
  ) {}

  get redirectUrl(): string {
    return REDIRECT_URI;
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.name,
      redirect_uris: [REDIRECT_URI],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      // A public client (a CLI or desktop app): PKCE instead of a secret.
      token_endpoint_auth_method: 'none',
    };
  }

  clientInformation(): OAuthClientInformationMixed | undefined {
    return this.client;
  }

  saveClientInformation(information: OAuthClientInformationMixed): void {
    this.client = information;
  }

  tokens(): OAuthTokens | undefined {
    return this.current;
  }

  saveTokens(tokens: OAuthTokens): void {
    this.current = tokens;
    this.savedTokens.push(tokens);
  }

  redirectToAuthorization(authorizationUrl: URL): void {
    this.authorizationUrls.push(authorizationUrl);
    this.callback = this.browser.authorize(authorizationUrl, REDIRECT_URI);
    // Awaited by the test through callbackUrl(); a failure is reported there.
    this.callback.catch(() => {});
  }

  saveCodeVerifier(codeVerifier: string): void {
    this.verifier = codeVerifier;
  }

  codeVerifier(): string {
    if (!this.verifier) throw new Error('no PKCE code verifier saved');
    return this.verifier;
  }

  // Kept so the SDK can check that the code is redeemed at the authorization server that issued it (SEP-2352).
  saveDiscoveryState(state: OAuthDiscoveryState): void {
    this.discovery = state;
  }

  discoveryState(): OAuthDiscoveryState | undefined {
    return this.discovery;
  }

  /** The callback URL of the last authorization the SDK started (`code`, `state`, `iss`), once the Browser got there. */
  async callbackUrl(): Promise<URL> {
    if (!this.callback) throw new Error('the SDK never sent the user to the authorization server');
    const url = await this.callback;
    this.callback = undefined;
    const error = url.searchParams.get('error');
    if (error) throw new Error(`authorization failed: ${error} ${url.searchParams.get('error_description') ?? ''}`);
    return url;
  }

  /** The `code` of {@link callbackUrl}. */
  async authorizationCode(): Promise<string> {
    const code = (await this.callbackUrl()).searchParams.get('code');
    if (!code) throw new Error('the callback carries no code');
    return code;
  }
}

/** One HTTP request a client made, to the MCP server or to the authorization server, and its answer's head. */
export interface WireRequest {
  method: string;
  url: string;
  /** The JSON-RPC method posted (`tools/call long_task` for a call), if any. */
  rpc: string | undefined;
  /** The bearer token sent, if any. */
  token: string | undefined;
  lastEventId: string | undefined;
  sessionId: string | undefined;
  status: number;
  wwwAuthenticate: string | undefined;
}

/**
 * A `fetch` for a client transport that keeps every request's head and its answer's status. Both
 * SDK majors make their OAuth requests (discovery, registration, token) through the transport's
 * `fetch` too, so this is the whole story in order.
 */
export class Wire {
  readonly requests: WireRequest[] = [];

  /** `onRequest`: told of each request once its answer's head is in (the auth demo prints them as they happen). */
  constructor(private readonly onRequest?: (request: WireRequest) => void) {}

  readonly fetch: typeof fetch = async (input, init) => {
    const request = new Request(input, init);
    const response = await fetch(input, init);
    const bearer = request.headers.get('authorization');
    const record: WireRequest = {
      method: request.method,
      url: request.url,
      rpc: rpcOf(init?.body),
      token: bearer?.toLowerCase().startsWith('bearer ') ? bearer.slice(7) : undefined,
      lastEventId: request.headers.get('last-event-id') ?? undefined,
      sessionId: request.headers.get('mcp-session-id') ?? undefined,
      status: response.status,
      wwwAuthenticate: response.headers.get('www-authenticate') ?? undefined,
    };
    this.requests.push(record);
    this.onRequest?.(record);
    return response;
  };

  /** The requests to the MCP endpoint `url` (not discovery, not the authorization server). */
  to(url: string): WireRequest[] {
    return this.requests.filter((r) => r.url === url);
  }

  /** Requests to `url` that posted `rpc` (`initialize`, `tools/call long_task`). */
  posted(url: string, rpc: string): WireRequest[] {
    return this.to(url).filter((r) => r.method === 'POST' && r.rpc === rpc);
  }

  /** GETs with Last-Event-ID: the client coming back for a stream the server closed (SEP-1699). */
  resumes(url: string): WireRequest[] {
    return this.to(url).filter((r) => r.method === 'GET' && r.lastEventId !== undefined);
  }
}

function rpcOf(body: unknown): string | undefined {
  if (typeof body !== 'string') return undefined;
  try {
    const message = JSON.parse(body) as { method?: unknown; params?: { name?: unknown } };
    if (typeof message.method !== 'string') return undefined;
    return message.method === 'tools/call' ? `tools/call ${String(message.params?.name)}` : message.method;
  } catch {
    return undefined;
  }
}
