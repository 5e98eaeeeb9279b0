/**
 * test/support/leaks.ts, the check test/setup/leak-check.ts runs after each integration file:
 * which processes and objects count as the file's leaks (tables), and real processes — a child
 * still running, and a grandchild whose parent exited (found by its mark alone).
 */
import { spawn } from "node:child_process";
import { describe, expect, it, onTestFinished } from "vitest";
import {
  describeLeaks,
  fileMarkEnv,
  findLeaks,
  goingAway,
  newObjects,
  newProcesses,
  type ObjectEntry,
  type ProcessEntry,
  processesOf,
  readProcesses,
} from "../support/leaks.ts";

const proc = (pid: number, ppid: number, extra: Partial<ProcessEntry> = {}): ProcessEntry => ({
  pid,
  ppid,
  state: "S",
  startTime: `${pid}00`,
  command: `cmd-${pid}`,
  ...extra,
});

const obj = (kind: string, name: string, uid: string, extra: Partial<ObjectEntry> = {}): ObjectEntry => ({
  kind,
  name,
  uid,
  terminating: false,
  finalizers: [],
  ...extra,
});

describe("processesOf", () => {
  const table = [
    proc(1, 0),
    proc(10, 1), // the worker
    proc(11, 10),
    proc(12, 11), // grandchild
    proc(13, 10, { state: "Z" }), // exited, not yet reaped
    proc(20, 1, { mark: "m" }), // reparented orphan with the file's mark
    proc(21, 1, { mark: "other" }), // another file's
    proc(30, 1), // unrelated (e.g. the devcluster)
  ];
  it("finds the worker's descendants and the marked processes, not zombies, others or the worker", () => {
    expect(
      processesOf(table, 10, "m")
        .map((p) => p.pid)
        .sort((a, b) => a - b),
    ).toEqual([11, 12, 20]);
  });
});

describe("newProcesses", () => {
  it.each([
    { what: "a process present before", before: [proc(11, 10)], after: [proc(11, 10)], leaked: [] },
    { what: "a new process", before: [], after: [proc(11, 10)], leaked: [11] },
    {
      what: "a reused pid (another start time)",
      before: [proc(11, 10)],
      after: [proc(11, 10, { startTime: "999" })],
      leaked: [11],
    },
    {
      what: "esbuild's service (ends with the worker)",
      before: [],
      after: [
        proc(11, 10, { command: "/x/node_modules/@esbuild/linux-x64/bin/esbuild --service=0.27.3 --ping" }),
      ],
      leaked: [],
    },
  ])("$what", ({ before, after, leaked }) => {
    expect(newProcesses(before, after).map((p) => p.pid)).toEqual(leaked);
  });
});

describe("newObjects", () => {
  const shared = new Set(["CustomResourceDefinition//proxies.crawl.kubefn.dev", "Namespace//kubefn-system"]);
  it.each([
    {
      what: "an object present before",
      before: [obj("Namespace", "a", "u1")],
      after: [obj("Namespace", "a", "u1")],
      leaked: [],
    },
    { what: "a new Namespace", before: [], after: [obj("Namespace", "a", "u1")], leaked: ["a"] },
    {
      what: "a Namespace deleted and created again (new UID)",
      before: [obj("Namespace", "a", "u1")],
      after: [obj("Namespace", "a", "u2")],
      leaked: ["a"],
    },
    {
      what: "a new Proxy in a namespace present before",
      before: [obj("Namespace", "default", "u0")],
      after: [obj("Namespace", "default", "u0"), obj("Proxy", "p", "u3", { namespace: "default" })],
      leaked: ["p"],
    },
    {
      what: "kubefn's install, applied by the file",
      before: [],
      after: [
        obj("CustomResourceDefinition", "proxies.crawl.kubefn.dev", "u4"),
        obj("Namespace", "kubefn-system", "u5"),
      ],
      leaked: [],
    },
    { what: "an object the file deleted", before: [obj("Namespace", "a", "u1")], after: [], leaked: [] },
  ])("$what", ({ before, after, leaked }) => {
    expect(newObjects(before, after, shared).map((o) => o.name)).toEqual(leaked);
  });
});

describe("goingAway", () => {
  const objects = [obj("Namespace", "going", "u1", { terminating: true }), obj("Namespace", "staying", "u2")];
  it.each([
    { what: "a terminating object", o: obj("ClusterRole", "r", "u3", { terminating: true }), going: true },
    {
      what: "an object in a terminating Namespace",
      o: obj("Proxy", "p", "u4", { namespace: "going" }),
      going: true,
    },
    {
      what: "an object in a Namespace that stays",
      o: obj("Proxy", "p", "u5", { namespace: "staying" }),
      going: false,
    },
    { what: "a cluster-scoped object", o: obj("ClusterRole", "r", "u6"), going: false },
  ])("$what", ({ o, going }) => {
    expect(goingAway(objects)(o)).toBe(going);
  });
});

describe("describeLeaks", () => {
  it("names each process and object, and what holds a terminating one", () => {
    expect(
      describeLeaks({
        processes: [proc(42, 10, { command: "node --import tsx functions/node/main.ts" })],
        objects: [
          obj("Namespace", "kill-1", "u1", { terminating: true }),
          obj("Proxy", "victim", "u2", {
            namespace: "kill-1",
            terminating: true,
            finalizers: ["crawl.kubefn.dev/x"],
          }),
          obj("ClusterRole", "tenant", "u3"),
          obj("SubPool", "pool", "u4", { finalizers: ["subrelay.example.com/finalizer"] }),
        ],
      }),
    ).toEqual([
      "process 42 still running: node --import tsx functions/node/main.ts",
      "Namespace kill-1 left in the cluster (terminating)",
      "Proxy kill-1/victim left in the cluster (terminating, finalizers crawl.kubefn.dev/x)",
      "ClusterRole tenant left in the cluster",
      "SubPool pool left in the cluster (finalizers subrelay.example.com/finalizer)",
    ]);
  });
});

describe("real processes", () => {
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  const killAtEnd = (pid: number) =>
    onTestFinished(() => {
      if (alive(pid)) process.kill(pid, "SIGKILL");
    });
  const mark = `unit-${process.pid}-${Date.now()}`;
  const none = { processes: [], objects: [] };
  const snapshot = async () => ({ processes: processesOf(readProcesses(), process.pid, mark), objects: [] });

  it("a child still running is a leak; one that exits within the grace is not", async () => {
    const before = await snapshot();
    const lingering = spawn("sleep", ["30"], { stdio: "ignore" });
    killAtEnd(lingering.pid!);
    const brief = spawn("sleep", ["0.5"], { stdio: "ignore" });
    const leaks = await findLeaks({ ...none, processes: before.processes }, snapshot, new Set(), {
      processGraceMs: 2000,
      pollMs: 100,
    });
    expect(leaks.processes.map((p) => p.pid)).toEqual([lingering.pid]);
    expect(brief.exitCode ?? brief.signalCode).not.toBeNull();
  });

  it("a grandchild whose parent exited is found by its mark, reparented away from this process", async () => {
    const before = await snapshot();
    const sh = spawn("sh", ["-c", "sleep 30 >/dev/null 2>&1 & echo $!"], {
      stdio: ["ignore", "pipe", "ignore"],
      env: { ...process.env, [fileMarkEnv]: mark },
    });
    let out = "";
    sh.stdout.setEncoding("utf8").on("data", (c: string) => {
      out += c;
    });
    await new Promise((resolve) => sh.once("close", resolve));
    const orphan = Number(out.trim());
    killAtEnd(orphan);
    const leaks = await findLeaks({ ...none, processes: before.processes }, snapshot, new Set(), {
      processGraceMs: 0,
    });
    const found = leaks.processes.find((p) => p.pid === orphan);
    expect(found?.command).toBe("sleep 30");
    expect(found?.ppid).not.toBe(process.pid);
    // Without the mark, the orphan is nobody's.
    expect(processesOf(readProcesses(), process.pid, "another-mark").map((p) => p.pid)).not.toContain(orphan);
  });
});
