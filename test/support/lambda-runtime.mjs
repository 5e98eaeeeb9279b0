/**
 * One Lambda function as a process, for the deploy-page walk (test/e2e/deploy-aws-page.test.ts):
 * `node lambda-runtime.mjs <code dir> <handler>` imports `<code dir>/<file>.mjs` as Lambda's Node
 * runtime does for the handler `<file>.<export>` (the function's environment is this process's),
 * then takes invocations as POSTs of the event (JSON) on a loopback port it prints as
 * `{"listening":<port>}`, answering `{"result":…}` or `{"error":…}` (a thrown invocation).
 */
import { createServer } from "node:http";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [dir, handler] = process.argv.slice(2);
const [file, name] = String(handler).split(".");
const fn = (await import(pathToFileURL(join(String(dir), `${file}.mjs`)).href))[String(name)];
if (typeof fn !== "function") throw new Error(`${handler}: no such handler in ${dir}`);

const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", async () => {
    const context = {
      functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
      invokedFunctionArn: `arn:aws:lambda:${process.env.AWS_REGION}:123456789012:function:${process.env.AWS_LAMBDA_FUNCTION_NAME}`,
      awsRequestId: crypto.randomUUID(),
      getRemainingTimeInMillis: () => 30_000,
    };
    let answer;
    try {
      answer = { result: (await fn(JSON.parse(Buffer.concat(chunks).toString("utf8")), context)) ?? null };
    } catch (err) {
      answer = { error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
  });
});
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ listening: server.address().port })}\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
