import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";

/** One HTTP request as it reached the local AWS endpoint. */
export interface WireRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  json: Record<string, unknown>;
}

export interface WireAnswer {
  status: number;
  headers?: Record<string, string>;
  body: unknown;
}

/**
 * A node:http server on 127.0.0.1 standing in for EventBridge and Scheduler: it records every
 * request and answers with `answer(req)`; by default the services' success shapes.
 */
export async function startAwsEndpoint(answer: (req: WireRequest) => WireAnswer = defaultAnswer) {
  const requests: WireRequest[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const wire: WireRequest = {
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body,
        json: body ? (JSON.parse(body) as Record<string, unknown>) : {},
      };
      requests.push(wire);
      const out = answer(wire);
      res.writeHead(out.status, { "content-type": "application/json", ...out.headers });
      res.end(JSON.stringify(out.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    putEvents: () => requests.filter((r) => r.headers["x-amz-target"] === "AWSEvents.PutEvents"),
    createSchedules: () => requests.filter((r) => r.path.startsWith("/schedules/")),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export type AwsEndpoint = Awaited<ReturnType<typeof startAwsEndpoint>>;

export function defaultAnswer(req: WireRequest): WireAnswer {
  if (req.headers["x-amz-target"] === "AWSEvents.PutEvents") {
    const entries = (req.json.Entries as unknown[]) ?? [];
    return {
      status: 200,
      body: { FailedEntryCount: 0, Entries: entries.map((_, i) => ({ EventId: `event-${i}` })) },
    };
  }
  const name = decodeURIComponent(req.path.split("?")[0]?.slice("/schedules/".length) ?? "");
  return {
    status: 200,
    body: { ScheduleArn: `arn:aws:scheduler:us-east-1:111122223333:schedule/kubefn/${name}` },
  };
}

/** Static credentials for the SDK's default chain (its env provider). */
export const TEST_CREDENTIALS = {
  AWS_ACCESS_KEY_ID: "AKIDKUBEFNTEST",
  AWS_SECRET_ACCESS_KEY: "kubefn-test-secret-access-key",
};
