/**
 * A local, stateful stand-in for oauth2.googleapis.com/token and compute.googleapis.com/compute/v1
 * for end-to-end tests: it verifies the JWT assertion against the service account's public key
 * and the bearer token on every Compute call (as Google does), and keeps instances the way the
 * Compute API reports them — an insert is PROVISIONING, then RUNNING with an address at the next
 * read; a delete is STOPPING, then gone (404) at the next read. Node-only test fixture.
 */
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { bytesFromBase64Url, pemFromBytes } from "../../shared/credentials/google.ts";

export interface GceServer {
  url: string;
  /** A service-account key JSON whose token_uri is this server; put it in GCE_CREDENTIALS. */
  credentials: string;
  /** Instances by name, as the API would return them. */
  instances: Map<string, { name: string; zone: string; status: string; labels: Record<string, string> }>;
  /** Every Compute call, "METHOD path". */
  calls: string[];
  /** The body of every instances.insert, as sent (the network, tags, metadata kubefn asks for). */
  inserted: Record<string, unknown>[];
  /** Requests refused for bad credentials (should stay empty). */
  authFailures: string[];
  /**
   * While true, a stopping instance stays STOPPING at every read (else it is gone at the next):
   * a test sees what kubefn does while a VM takes its time to stop, however fast kubefn reads.
   */
  holdStopping: boolean;
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * Starts the server for `project`; instances get `address` as their external IP. Access tokens
 * live `tokenLifetimeSeconds` (Google's: an hour); `GET /tokeninfo?access_token=` says whose a
 * live one is, as oauth2.googleapis.com/tokeninfo does (400 for an unknown or expired token).
 */
export async function startGceServer(
  project: string,
  address = "127.0.0.1",
  options: { tokenLifetimeSeconds?: number } = {},
): Promise<GceServer> {
  const tokenLifetimeSeconds = options.tokenLifetimeSeconds ?? 3599;
  const pair = await crypto.subtle.generateKey(
    {
      name: "RSASSA-PKCS1-v1_5",
      modulusLength: 2048,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: "SHA-256",
    },
    true,
    ["sign", "verify"],
  );
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey("pkcs8", pair.privateKey));
  const clientEmail = `kubefn@${project}.iam.gserviceaccount.com`;
  const instances: GceServer["instances"] = new Map();
  const calls: string[] = [];
  const inserted: Record<string, unknown>[] = [];
  const authFailures: string[] = [];
  /** Access token → when it expires (ms). */
  const tokens = new Map<string, number>();
  const live = (token: string) => (tokens.get(token) ?? 0) > Date.now();
  let url = "";

  const verify = async (assertion: string) => {
    const [header, claims, signature] = assertion.split(".");
    if (!header || !claims || !signature) return undefined;
    const ok = await crypto.subtle.verify(
      "RSASSA-PKCS1-v1_5",
      pair.publicKey,
      bytesFromBase64Url(signature),
      new TextEncoder().encode(`${header}.${claims}`),
    );
    return ok
      ? (JSON.parse(new TextDecoder().decode(bytesFromBase64Url(claims))) as Record<string, unknown>)
      : undefined;
  };
  const notFound = (name: string) => ({
    error: {
      code: 404,
      message: `The resource 'projects/${project}/zones/z/instances/${name}' was not found`,
      errors: [{ message: "not found", domain: "global", reason: "notFound" }],
    },
  });
  const operation = (kind: string, name: string, zone: string) => ({
    kind: "compute#operation",
    name: `operation-${Date.now()}`,
    operationType: kind,
    targetLink: `${url}/compute/v1/projects/${project}/zones/${zone}/instances/${name}`,
    status: "RUNNING",
  });
  const view = (i: { name: string; zone: string; status: string; labels: Record<string, string> }) => ({
    kind: "compute#instance",
    name: i.name,
    zone: `${url}/compute/v1/projects/${project}/zones/${i.zone}`,
    status: i.status,
    creationTimestamp: "2026-11-30T12:00:00.000-08:00",
    labels: i.labels,
    networkInterfaces: [
      {
        networkIP: "10.128.0.2",
        accessConfigs: i.status === "RUNNING" ? [{ type: "ONE_TO_ONE_NAT", natIP: address }] : [{}],
      },
    ],
  });

  // Read by the handler (holdStopping), assigned once the server listens.
  let api: GceServer;
  const server = createServer((req, res) => {
    void (async () => {
      const u = new URL(req.url ?? "/", "http://localhost");
      const text = await readBody(req);
      const send = (status: number, body?: unknown) => {
        res.writeHead(status, { "content-type": "application/json; charset=UTF-8" });
        res.end(body === undefined ? "" : JSON.stringify(body));
      };
      if (u.pathname === "/token") {
        const form = new URLSearchParams(text);
        const claims = await verify(form.get("assertion") ?? "");
        if (!claims || claims.iss !== clientEmail || claims.aud !== `${url}/token`) {
          authFailures.push("bad token request");
          return send(400, { error: "invalid_grant" });
        }
        const token = `ya29.e2e-${tokens.size + 1}`;
        tokens.set(token, Date.now() + tokenLifetimeSeconds * 1000);
        return send(200, { access_token: token, expires_in: tokenLifetimeSeconds, token_type: "Bearer" });
      }
      if (u.pathname === "/tokeninfo") {
        const token = u.searchParams.get("access_token") ?? "";
        if (!live(token)) return send(400, { error: "invalid_token", error_description: "Invalid Value" });
        const expiresIn = Math.floor(((tokens.get(token) ?? 0) - Date.now()) / 1000);
        return send(200, { email: clientEmail, email_verified: "true", expires_in: String(expiresIn) });
      }
      const bearer = (req.headers.authorization ?? "").replace(/^Bearer /, "");
      if (!live(bearer)) {
        authFailures.push(`bad bearer on ${req.method} ${u.pathname}`);
        return send(401, {
          error: { code: 401, message: "Request had invalid authentication credentials." },
        });
      }
      calls.push(`${req.method} ${u.pathname}`);
      const m = /^\/compute\/v1\/projects\/([^/]+)\/zones\/([^/]+)\/instances(?:\/([^/]+))?$/.exec(
        u.pathname,
      );
      if (!m || m[1] !== project) return send(404, notFound(u.pathname));
      const zone = m[2]!;
      const name = m[3];
      if (req.method === "POST" && !name) {
        const body = JSON.parse(text) as { name: string; labels?: Record<string, string> };
        inserted.push(body);
        if (instances.has(body.name)) {
          return send(409, {
            error: { code: 409, message: "already exists", errors: [{ reason: "alreadyExists" }] },
          });
        }
        instances.set(body.name, {
          name: body.name,
          zone,
          status: "PROVISIONING",
          labels: body.labels ?? {},
        });
        return send(200, operation("insert", body.name, zone));
      }
      if (req.method === "GET" && !name) {
        const [key, value] = (u.searchParams.get("filter") ?? "").split("=");
        const wanted = value === undefined ? undefined : (JSON.parse(value) as string);
        const labelKey = key?.replace(/^labels\./, "");
        const items = [...instances.values()]
          .filter((i) => i.zone === zone && (labelKey === undefined || i.labels[labelKey] === wanted))
          .map(view);
        return send(200, { kind: "compute#instanceList", items });
      }
      const instance = name ? instances.get(name) : undefined;
      if (!instance || !name) return send(404, notFound(name ?? ""));
      if (req.method === "GET") {
        const shown = view(instance);
        // The next read sees progress: a booting VM comes up, a stopping one is gone.
        if (instance.status === "PROVISIONING") instance.status = "RUNNING";
        else if (instance.status === "STOPPING" && !api.holdStopping) instances.delete(name);
        return send(200, shown);
      }
      if (req.method === "DELETE") {
        instance.status = "STOPPING";
        return send(200, operation("delete", name, zone));
      }
      return send(405, { error: { code: 405, message: "method not allowed" } });
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  api = {
    url,
    credentials: JSON.stringify({
      type: "service_account",
      client_email: clientEmail,
      private_key: pemFromBytes(pkcs8, "PRIVATE KEY"),
      private_key_id: "e2e0001",
      token_uri: `${url}/token`,
    }),
    instances,
    calls,
    inserted,
    authFailures,
    holdStopping: false,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  return api;
}
