// A real OAuth 2.1 / OpenID Connect authorization server for kernel-mcp's OAuth tests
// (tests/it/oauth.rs, tests/it/common/oauth.rs): oidc-provider on 127.0.0.1, with
//
// - two users: alice (may be granted read, execute and admin) and bob (read and execute),
//   passwords `alice-password` and `bob-password`, signed in through a small login form
//   (GET /interaction/:uid, POST /interaction/:uid/login) that a test scripts over HTTP;
// - a public client `kernel-mcp-test` (authorization code + PKCE, refresh tokens, redirect
//   URIs on http://127.0.0.1), and dynamic client registration for MCP clients that register
//   themselves; for kernel-mcp's broker (tests/it/broker_oauth.rs) a native client
//   `broker-native` (a loopback redirect on any port) and a confidential client
//   `broker-service` (secret `broker-service-secret`, the client credentials grant, scopes
//   read and execute);
// - resource indicators (RFC 8707): a token asked for `resource=R` is a JWT access token
//   (RFC 9068, RS256) with `aud` R and the requested scopes the user may have
//   (`kernel-mcp:read`, `kernel-mcp:execute`, `kernel-mcp:admin`), plus `preferred_username`;
// - its signing keys in a file (`--keys FILE`, created when missing), so a restart on the same
//   port with `--rotate` publishes a new key first (tokens are signed with it) and keeps the
//   old one (key rotation).
//
// Test-only, on the same port: POST /harness/mint {claims, alg?, kid?, key?} signs a token
// itself, for the cases a real server never issues (expired, `none`, HS256, a key it does not
// publish). `key`: `issuer` (its current signing key, the default), `foreign` (a key nobody
// publishes), `hs256` (a shared secret). Everything it mints says so in the test names.
//
// Usage: node provider.mjs [--port N] [--keys FILE] [--rotate] [--access-ttl SECONDS]
// Prints one JSON line on stdout once listening: {"issuer": "...", "port": N}.

import * as http from 'node:http';
import * as fs from 'node:fs';
import * as crypto from 'node:crypto';
import { parseArgs } from 'node:util';

import Provider from 'oidc-provider';
import * as jose from 'jose';

const { values: args } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    keys: { type: 'string' },
    rotate: { type: 'boolean', default: false },
    'access-ttl': { type: 'string', default: '600' },
  },
});

const SCOPES = ['kernel-mcp:read', 'kernel-mcp:execute', 'kernel-mcp:admin'];
const USERS = {
  alice: { password: 'alice-password', email: 'alice@example.test', scopes: SCOPES },
  bob: { password: 'bob-password', email: 'bob@example.test', scopes: SCOPES.slice(0, 2) },
};

async function newKey() {
  const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
  const jwk = await jose.exportJWK(privateKey);
  return { ...jwk, kid: crypto.randomUUID(), alg: 'RS256', use: 'sig' };
}

async function loadKeys() {
  let keys = [];
  if (args.keys && fs.existsSync(args.keys)) {
    keys = JSON.parse(fs.readFileSync(args.keys, 'utf8')).keys;
  }
  if (keys.length === 0 || args.rotate) {
    keys = [await newKey(), ...keys].slice(0, 2);
  }
  if (args.keys) {
    fs.writeFileSync(args.keys, JSON.stringify({ keys }), { mode: 0o600 });
  }
  return keys;
}

function resourceServer(indicator) {
  return {
    scope: SCOPES.join(' '),
    audience: indicator,
    accessTokenTTL: Number(args['access-ttl']),
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg: 'RS256' } },
  };
}

// Grant `accountId` the requested `scope`s it may have, for each requested `resource`, and
// refuse the rest (refused scopes are left out of the token instead of asking again).
function fillGrant(grant, accountId, scope, resource) {
  const asked = String(scope || '').split(' ').filter(Boolean);
  const resources = [resource].flat().filter(Boolean);
  const wanted = asked.filter((s) => SCOPES.includes(s));
  const allowed = wanted.filter((s) => USERS[accountId].scopes.includes(s));
  const refused = wanted.filter((s) => !allowed.includes(s));
  const oidc = asked.filter((s) => ['openid', 'offline_access'].includes(s));
  grant.addOIDCScope([...oidc, ...allowed].join(' '));
  if (refused.length) grant.rejectOIDCScope(refused.join(' '));
  for (const indicator of resources) {
    if (allowed.length) grant.addResourceScope(indicator, allowed.join(' '));
    if (refused.length) grant.rejectResourceScope(indicator, refused.join(' '));
  }
}

function configuration(keys) {
  return {
    clients: [{
      client_id: 'kernel-mcp-test',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: ['http://127.0.0.1/callback'],
    }, {
      // kernel-mcp's broker signing in as a native app (RFC 8252: any loopback port).
      client_id: 'broker-native',
      application_type: 'native',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: ['http://127.0.0.1/callback'],
    }, {
      // kernel-mcp's broker as a service of its own (the client credentials grant).
      client_id: 'broker-service',
      client_secret: 'broker-service-secret',
      token_endpoint_auth_method: 'client_secret_post',
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      scope: 'kernel-mcp:read kernel-mcp:execute',
    }],
    jwks: { keys },
    cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
    findAccount: async (_ctx, id) => USERS[id] && {
      accountId: id,
      claims: async () => ({ sub: id, preferred_username: id, email: USERS[id].email }),
    },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      clientCredentials: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => undefined,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, indicator) => {
          if (!/^https?:\/\//.test(indicator)) {
            throw new Error('resource indicators are http(s) URLs here');
          }
          return resourceServer(indicator);
        },
      },
    },
    pkce: { required: () => true },
    // kernel-mcp's scopes are the resource server's (resourceServer above); they are listed
    // here too so that a client may name them when it registers itself.
    scopes: ['openid', 'offline_access', ...SCOPES],
    claims: { openid: ['sub'], profile: ['preferred_username'], email: ['email'] },
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    extraTokenClaims: async (_ctx, token) => (token.accountId && USERS[token.accountId]
      ? { preferred_username: token.accountId }
      : undefined),
    // Each sign-in grants what was asked that the user may have, and refuses the rest, so no
    // consent screen is needed (a first-party client).
    loadExistingGrant: async (ctx) => {
      const accountId = ctx.oidc.session?.accountId;
      if (!accountId || !USERS[accountId]) return undefined;
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId });
      fillGrant(grant, accountId, ctx.oidc.params.scope, ctx.oidc.params.resource);
      await grant.save();
      return grant;
    },
    ttl: {
      AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL || 600,
      ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL || 600,
      Grant: 3600,
      Interaction: 600,
      Session: 3600,
      RefreshToken: 3600,
    },
  };
}

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8');
}

const escape = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

async function interaction(provider, req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) throw new Error('interaction mismatch');
  if (req.method === 'GET') {
    const step = details.prompt.name === 'login' ? 'login' : 'confirm';
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(`<!doctype html><title>kernel-mcp test sign-in</title>
<form method="post" action="/interaction/${escape(uid)}/${step}">
${step === 'login' ? '<input name="login"> <input name="password" type="password">' : ''}
<button>${step === 'login' ? 'Sign in' : 'Allow'}</button></form>`);
    return;
  }
  const form = new URLSearchParams(await readBody(req));
  let result;
  if (action === 'login') {
    const user = USERS[form.get('login')];
    if (!user || user.password !== form.get('password')) {
      res.writeHead(401, { 'content-type': 'text/plain' });
      res.end('wrong user name or password');
      return;
    }
    result = { login: { accountId: form.get('login') } };
  } else {
    const { accountId } = details.session;
    const grant = (details.grantId && await provider.Grant.find(details.grantId))
      || new provider.Grant({ accountId, clientId: details.params.client_id });
    fillGrant(grant, accountId, details.params.scope, details.params.resource);
    result = { consent: { grantId: await grant.save() } };
  }
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
}

async function mint(provider, keys, req, res) {
  const spec = JSON.parse(await readBody(req) || '{}');
  const now = Math.floor(Date.now() / 1000);
  const claims = { iss: provider.issuer, iat: now, exp: now + 600, ...spec.claims };
  const header = { typ: 'at+jwt', alg: spec.alg || 'RS256' };
  let token;
  if (spec.key === 'none' || header.alg === 'none') {
    const enc = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
    token = `${enc({ ...header, alg: 'none' })}.${enc(claims)}.`;
  } else if (spec.key === 'hs256') {
    token = await new jose.SignJWT(claims).setProtectedHeader({ ...header, alg: 'HS256', kid: spec.kid || keys[0].kid })
      .sign(new TextEncoder().encode('a-shared-secret-anyone-could-guess'));
  } else {
    const jwk = spec.key === 'foreign' ? await newKey() : keys[0];
    const key = await jose.importJWK(jwk, 'RS256');
    token = await new jose.SignJWT(claims)
      .setProtectedHeader({ ...header, kid: spec.kid === undefined ? jwk.kid : spec.kid || undefined })
      .sign(key);
  }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ token }));
}

async function main() {
  const keys = await loadKeys();
  const server = http.createServer();
  await new Promise((resolve) => server.listen(Number(args.port), '127.0.0.1', resolve));
  const { port } = server.address();
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, configuration(keys));
  const callback = provider.callback();
  server.on('request', async (req, res) => {
    try {
      const url = new URL(req.url, issuer);
      const m = url.pathname.match(/^\/interaction\/([^/]+)(?:\/(login|confirm))?$/);
      if (m) return await interaction(provider, req, res, m[1], m[2]);
      if (url.pathname === '/harness/mint' && req.method === 'POST') {
        return await mint(provider, keys, req, res);
      }
      return callback(req, res);
    } catch (e) {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`harness error: ${e.message}`);
    }
  });
  process.stdout.write(`${JSON.stringify({ issuer, port })}\n`);
  const stop = () => server.close(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  // The test that started us is gone when stdin closes.
  process.stdin.on('end', stop);
  process.stdin.resume();
}

main().catch((e) => {
  process.stderr.write(`${e.stack}\n`);
  process.exit(1);
});
