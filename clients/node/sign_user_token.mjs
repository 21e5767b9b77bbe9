// Node 18+ (no npm package): sign a user token on your backend. secret, kid and audience are the answer of
// GET /v1/user-tokens/signing-secret (store them with your other secrets).
import { createHmac } from "node:crypto";
import { pathToFileURL } from "node:url";

const b64url = (text) => Buffer.from(text).toString("base64url");

export function signUserToken(externalId, ttlSeconds, { secret, kid, audience }) {
  const now = Math.floor(Date.now() / 1000);
  const header = b64url(JSON.stringify({ alg: "HS256", typ: "JWT", kid }));
  const claims = b64url(JSON.stringify({ sub: externalId, aud: audience, iat: now, exp: now + ttlSeconds }));
  const signature = createHmac("sha256", Buffer.from(secret, "base64url")).update(`${header}.${claims}`);
  return { token: `${header}.${claims}.${signature.digest("base64url")}`, expires_at: now + ttlSeconds };
}

// Your backend's token endpoint answers the signed-in user only, e.g. with Express:
//   app.post("/my-backend/hato-token", requireLogin, (req, res) => res.json(signUserToken(req.user.externalId, 3600, hato)));
// Run directly: HATO_SIGNING_SECRET=… HATO_KEY_PREFIX=… HATO_URL=… node sign_user_token.mjs <external id> [ttl]
if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const hato = { secret: process.env.HATO_SIGNING_SECRET, kid: process.env.HATO_KEY_PREFIX, audience: process.env.HATO_URL };
  console.log(JSON.stringify(signUserToken(process.argv[2], Number(process.argv[3] ?? 3600), hato)));
}
