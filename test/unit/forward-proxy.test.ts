/**
 * The forward-proxy image's squid.conf (infra/forward-proxy/), run by the squid its Containerfile
 * installs (Debian bookworm's, unpacked by scripts/squid.sh; no container runtime here), as the
 * Pod runs it: uid 65532, in the foreground, its messages on stderr. What a tenant's crawler asks
 * of it: loopback (a live target there included), the metadata address, private, CGNAT and
 * IPv6 internal ranges, and ports other than 80 and 443 are refused (403, the target never
 * reached); a public name on port 80 is tried (not denied: nothing answers here).
 *
 * Only the listening address and where squid finds its own files (the unpacked package's paths)
 * are added to the configuration.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHttpTarget, type Target } from "../support/probe-fixtures.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const run = promisify(execFile);

let squid: ChildProcess | undefined;
let work: string;
let port: number;
let target: Target;
let output = "";

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

beforeAll(async () => {
  const binary = join(root, (await run("bash", ["scripts/squid.sh"], { cwd: root })).stdout.trim());
  const unpacked = join(root, ".squid/root");
  const arch = (
    await run("gcc", ["-dumpmachine"]).catch(() => ({ stdout: `${process.arch}-linux-gnu` }))
  ).stdout.trim();
  port = await freePort();
  target = await startHttpTarget();
  work = mkdtempSync(join(tmpdir(), "kubefn-squid-"));
  chmodSync(work, 0o777);
  const conf = readFileSync(join(root, "infra/forward-proxy/squid.conf"), "utf8");
  expect(conf).toMatch(/^http_port 3128$/m);
  writeFileSync(
    join(work, "squid.conf"),
    `${conf.replace(/^http_port 3128$/m, `http_port 127.0.0.1:${port}`)}
mime_table ${unpacked}/usr/share/squid/mime.conf
icon_directory ${unpacked}/usr/share/squid/icons
error_directory ${unpacked}/usr/share/squid-langpack/templates
unlinkd_program ${unpacked}/usr/lib/squid/unlinkd
`,
  );
  chmodSync(join(work, "squid.conf"), 0o644);
  // The Pod's uid (buildPod: runAsUser 65532) when the tests may take it.
  const asPod = process.getuid?.() === 0 ? { uid: 65532, gid: 65532 } : {};
  const child = spawn(binary, ["-N", "-f", join(work, "squid.conf")], {
    cwd: work,
    env: { ...process.env, LD_LIBRARY_PATH: join(unpacked, "usr/lib", arch) },
    stdio: ["ignore", "pipe", "pipe"],
    ...asPod,
  });
  squid = child;
  await new Promise<void>((resolve, reject) => {
    const seen = (chunk: Buffer) => {
      output += chunk.toString("utf8");
      if (output.includes("Accepting HTTP Socket connections")) resolve();
    };
    child.stdout?.on("data", seen);
    child.stderr?.on("data", seen);
    child.once("exit", (code) => reject(new Error(`squid exited (${code}):\n${output}`)));
  });
  // squid logs "Accepting" as it opens the port: under load a first connection can still be
  // refused a moment later. Ready once a connection is taken.
  for (let tries = 0; ; tries++) {
    const taken = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, "127.0.0.1");
      socket.once("connect", () => resolve(true));
      socket.once("error", () => resolve(false));
    }).then((ok) => ok);
    if (taken) break;
    if (tries >= 100)
      throw new Error(`squid logged that it accepts connections, but refuses them:\n${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}, 120_000);

afterAll(async () => {
  if (squid && squid.exitCode === null) {
    const exited = new Promise((r) => squid?.once("exit", r));
    squid.kill("SIGKILL");
    await exited;
  }
  await target?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** A GET in absolute form through the proxy: its status. */
function get(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: "127.0.0.1", port, path: url, headers: { host: new URL(url).host } },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** A CONNECT through the proxy: the status it answered. */
function connect(authority: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method: "CONNECT", path: authority });
    req.on("connect", (res, socket) => {
      socket.destroy();
      resolve(res.statusCode ?? 0);
    });
    req.on("response", (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", reject);
    req.end();
  });
}

describe("infra/forward-proxy/squid.conf, run by Debian's squid as the Pod runs it", () => {
  it("refuses a live target on loopback, which never sees the request", async () => {
    expect(await get(`http://127.0.0.1:${target.port}/`)).toBe(403);
    expect(await connect(`127.0.0.1:${target.port}`)).toBe(403);
    expect(target.hits).toBe(0);
  });

  it.each([
    ["the metadata service", "http://169.254.169.254/latest/meta-data/"],
    ["a private address", "http://10.0.0.1/"],
    ["a private address", "http://172.16.0.1/"],
    ["a private address", "http://192.168.1.1/"],
    ["CGNAT", "http://100.64.0.1/"],
    ["IPv6 loopback", "http://[::1]/"],
    ["IPv6 unique local", "http://[fd00::1]/"],
    ["a port other than 80 and 443", "http://192.0.2.10:8080/"],
  ])("refuses %s: %s", async (_, url) => {
    expect(await get(url)).toBe(403);
  });

  it.each([
    ["a private address on 443", "10.0.0.1:443"],
    ["the metadata service on 80", "169.254.169.254:80"],
    ["a port other than 80 and 443", "192.0.2.10:22"],
  ])("refuses CONNECT to %s", async (_, authority) => {
    expect(await connect(authority)).toBe(403);
  });

  it("tries a public name on port 80 (no Internet here: an error answer, not a refusal)", async () => {
    const status = await get("http://kubefn-forward-proxy-test.invalid/");
    expect(status).not.toBe(403);
    expect(status).toBeGreaterThanOrEqual(500);
  });
});
