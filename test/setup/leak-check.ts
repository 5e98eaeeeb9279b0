/**
 * setupFiles module of the "integration" project: every file must release what it started and
 * created (test/support/leaks.ts). Wraps each file (an `aroundAll`, registered before the file's
 * own hooks, so its end runs after the file's `afterAll`s, failed or not): notes the processes and
 * cluster objects there before the file, and after it fails the file with the list of what it
 * leaked — processes it started that still run, objects it created that are still there — then
 * ends those, so the next file starts clean and a leak fails the file that leaked, not the next.
 *
 * The file's processes carry a mark in their environment (set here, before the file loads):
 * found even when their parent died and they were reparented away from the worker.
 */
import { randomBytes } from "node:crypto";
import { aroundAll, inject } from "vitest";
import { createFetchTransport, createKube } from "../../shared/kube/index.ts";
import {
  clusterObjects,
  describeLeaks,
  fileMarkEnv,
  findLeaks,
  processesOf,
  readProcesses,
  releaseLeaks,
  sharedInstall,
} from "../support/leaks.ts";
import "./devcluster.ts"; // the ProvidedContext declaration

const mark = `${process.pid}-${randomBytes(6).toString("hex")}`;
process.env[fileMarkEnv] = mark;
const fileProcesses = () => processesOf(readProcesses(), process.pid, mark);
const processesBefore = fileProcesses();

aroundAll(async (runSuite) => {
  const kube = createKube(
    createFetchTransport({ server: inject("httpProxy"), token: inject("adminToken") }),
    {
      fieldManager: "leak-check",
    },
  );
  const shared = await sharedInstall();
  const before = { processes: processesBefore, objects: await clusterObjects(kube) };
  await runSuite();
  const leaks = await findLeaks(
    before,
    async () => ({ processes: fileProcesses(), objects: await clusterObjects(kube) }),
    shared,
  );
  const lines = describeLeaks(leaks);
  if (lines.length === 0) return;
  await releaseLeaks(kube, leaks);
  throw new Error(
    `this file left behind what it started or created (released now, so the next file starts clean):\n  ${lines.join("\n  ")}`,
  );
}, 240_000);
