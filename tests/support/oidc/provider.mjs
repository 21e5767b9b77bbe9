// A real OpenID Connect provider (node-oidc-provider, OpenID certified) for the sign-in tests, on 127.0.0.1.
// PORT and CLIENTS (JSON list of client metadata) come from the environment. Test-only endpoints beside it:
//   POST /_test/accounts  {"<login>": {"email", "name", "groups": [...]}}  who can sign in, with their claims
//   POST /_test/rotate    a new signing key with a new kid (the old one is gone from the JWKS)
//   POST /_test/expire    {"on": true}: ID tokens are issued already expired (iat and exp two hours back)
//   POST /_test/audience  {"aud": "someone-else"}: ID tokens are issued for that audience ({"aud": null}: the client)
// The login page is the library's own development page: any password is accepted for a known login.
import crypto from 'node:crypto';
import http from 'node:http';

import Provider from 'oidc-provider';

const port = Number(process.env.PORT);
const issuer = `http://127.0.0.1:${port}`;
const clients = JSON.parse(process.env.CLIENTS);
const accounts = new Map();
let expired = false;
let audience = null;

function newKey() {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: crypto.randomUUID(), use: 'sig', alg: 'RS256' };
}

function build(key) {
  const provider = new Provider(issuer, {
    clients,
    jwks: { keys: [key] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] },
    conformIdTokenClaims: false, // the scopes' claims go into the ID token too, as Okta/Entra/Keycloak can be set to
    pkce: { required: () => true },
    cookies: { keys: ['hato-tests-only-cookie-key'] },
    features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
    async findAccount(ctx, id) {
      const account = accounts.get(id);
      if (!account) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, email_verified: true, ...account }) };
    },
    // First-party clients: no consent screen (every scope asked for is granted).
    async loadExistingGrant(ctx) {
      const grant = new ctx.oidc.provider.Grant({
        clientId: ctx.oidc.client.clientId,
        accountId: ctx.oidc.session.accountId,
      });
      grant.addOIDCScope('openid email profile groups');
      await grant.save();
      return grant;
    },
  });
  const issue = provider.IdToken.prototype.issue;
  provider.IdToken.prototype.issue = async function issueTampered(...args) {
    if (audience && this.client) {
      const real = this.client;
      this.client = new Proxy(real, { get: (t, p) => (p === 'clientId' ? audience : Reflect.get(t, p, t)) });
    }
    if (!expired) return issue.apply(this, args);
    const realNow = Date.now;
    Date.now = () => realNow() - 7200 * 1000;
    try {
      return await issue.apply(this, args);
    } finally {
      Date.now = realNow;
    }
  };
  return provider;
}

let key = newKey();
let provider = build(key);

function readJson(req) {
  return new Promise((resolve, reject) => {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => { try { resolve(body ? JSON.parse(body) : {}); } catch (err) { reject(err); } });
  });
}

const server = http.createServer(async (req, res) => {
  if (req.method === 'POST' && req.url.startsWith('/_test/')) {
    const body = await readJson(req);
    if (req.url === '/_test/accounts') {
      for (const [id, claims] of Object.entries(body)) accounts.set(id, claims);
    } else if (req.url === '/_test/rotate') {
      key = newKey();
      provider = build(key); // the in-memory adapter (sessions, codes) is shared by every instance
    } else if (req.url === '/_test/expire') {
      expired = Boolean(body.on);
    } else if (req.url === '/_test/audience') {
      audience = body.aud || null;
    } else {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ kid: key.kid }));
    return;
  }
  provider.callback()(req, res);
});

server.listen(port, '127.0.0.1', () => { console.log(`listening ${issuer}`); });
