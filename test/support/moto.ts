/**
 * moto's server (PyPI `moto[server]`, installed into .tools/venv by scripts/python-tools.sh, which
 * `npm test` runs) on a free loopback port, standing in for SQS, Secrets Manager and IAM. It
 * checks each call's shape and keeps what was created, honours per-message delays, visibility
 * timeouts and redrive policies; it has no event source mapping, so a test receives a batch and
 * invokes the function with it as Lambda's poller would ({@link KubefnAws.poll}).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  PurgeQueueCommand,
  ReceiveMessageCommand,
  SQSClient,
  type Message as SqsMessage,
} from "@aws-sdk/client-sqs";
import { parse } from "yaml";
import type { SqsEvent, SqsRecord } from "../../functions/aws/queue.ts";
import { expandedBody, type Message } from "../../shared/runtime/index.ts";

/** Static credentials for the SDK's default chain (its env provider); moto accepts any. */
export const TEST_CREDENTIALS = {
  AWS_ACCESS_KEY_ID: "AKIDKUBEFNTEST",
  AWS_SECRET_ACCESS_KEY: "kubefn-test-secret-access-key",
};
export const REGION = "us-east-1";

const motoServer = new URL("../../.tools/venv/bin/moto_server", import.meta.url).pathname;

export interface Moto {
  /** `http://127.0.0.1:<port>`, for every SDK client's `endpoint`. */
  endpoint: string;
  close(): Promise<void>;
}

/** Starts `moto_server` on a free loopback port (about a second). */
export async function startMoto(): Promise<Moto> {
  if (!existsSync(motoServer)) throw new Error(`${motoServer} missing: run bash scripts/python-tools.sh`);
  const child: ChildProcess = spawn(motoServer, ["-H", "127.0.0.1", "-p0"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const endpoint = await new Promise<string>((resolve, reject) => {
    let out = "";
    const seen = (chunk: Buffer) => {
      out += chunk.toString("utf8");
      const m = /Running on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m?.[1]) resolve(m[1]);
    };
    child.stdout?.on("data", seen);
    child.stderr?.on("data", seen);
    child.once("exit", (code) => reject(new Error(`moto_server exited (${code}): ${out}`)));
  });
  return {
    endpoint,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill();
      }),
  };
}

// CloudFormation's short tags (!Ref, …) are kept as the plain values they tag.
const template = parse(readFileSync(new URL("../../infra/aws/template.yaml", import.meta.url), "utf8"), {
  logLevel: "error",
}) as {
  Resources: Record<string, { Properties?: Record<string, unknown> }>;
};

/** The reconcile queue's attributes as infra/aws/template.yaml sets them. */
export const templateQueue = template.Resources.ReconcileQueue?.Properties as {
  VisibilityTimeout: number;
  RedrivePolicy: { maxReceiveCount: number };
};

/** An SQS message as moto holds it (its `/moto-api/data.json`), times in ms since the epoch. */
export interface HeldMessage {
  id: string;
  body: string;
  /** The `DelaySeconds` it was sent with. */
  delaySeconds: number;
  sentAt: number;
  visibleAt: number;
  receiveCount: number;
  /** Its message attributes, as moto stores them. */
  attributes: unknown;
}

/**
 * kubefn's reconcile queue in moto as infra/aws/template.yaml makes it: its visibility timeout,
 * and a redrive policy to a dead-letter queue after `maxReceiveCount` receives (the template's
 * unless given).
 */
export async function createKubefnAws(
  endpoint: string,
  opts: { queueName?: string; maxReceiveCount?: number } = {},
) {
  const aws = {
    region: REGION,
    endpoint,
    credentials: { accessKeyId: "AKIDKUBEFNTEST", secretAccessKey: "x" },
  };
  const sqs = new SQSClient(aws);
  const queueName = opts.queueName ?? "kubefn";
  const dlq = await sqs.send(new CreateQueueCommand({ QueueName: `${queueName}-dlq` }));
  const deadLetterQueueUrl = dlq.QueueUrl as string;
  const dlqAttrs = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: deadLetterQueueUrl, AttributeNames: ["QueueArn"] }),
  );
  const queue = await sqs.send(
    new CreateQueueCommand({
      QueueName: queueName,
      Attributes: {
        VisibilityTimeout: String(templateQueue.VisibilityTimeout),
        RedrivePolicy: JSON.stringify({
          deadLetterTargetArn: dlqAttrs.Attributes?.QueueArn,
          maxReceiveCount: opts.maxReceiveCount ?? templateQueue.RedrivePolicy.maxReceiveCount,
        }),
      },
    }),
  );
  const queueUrl = queue.QueueUrl as string;
  const queueArn = `arn:aws:sqs:${REGION}:123456789012:${queueName}`;

  /** One ReceiveMessage of up to 10 visible messages, as records of an event source batch. */
  async function receive(url = queueUrl, waitTimeSeconds = 0): Promise<SqsRecord[]> {
    const got = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: waitTimeSeconds,
        MessageSystemAttributeNames: ["All"],
        MessageAttributeNames: ["All"],
      }),
    );
    return (got.Messages ?? []).map((m) => recordOf(m, queueArn));
  }

  async function remove(url: string, records: readonly SqsRecord[]): Promise<void> {
    if (records.length === 0) return;
    await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: url,
        Entries: records.map((r, i) => ({ Id: String(i), ReceiptHandle: r.receiptHandle })),
      }),
    );
  }

  /** Every visible message of `url`, taken off the queue, in batches as the event source delivers them. */
  async function drain(url: string): Promise<SqsEvent[]> {
    const out: SqsEvent[] = [];
    for (;;) {
      const records = await receive(url);
      if (records.length === 0) return out;
      out.push({ Records: records });
      await remove(url, records);
    }
  }

  const taken = new Set<string>();
  return {
    queueUrl,
    deadLetterQueueUrl,
    /** The function's environment for this queue. */
    env: { QUEUE_URL: queueUrl },
    /**
     * The visible messages, taken off the queue, as SQS event batches (the function can be invoked
     * with each; a retry's visibility change then finds no message, which it logs).
     */
    delivered: () => drain(queueUrl),
    /** The message bodies of {@link delivered}, parsed (and expanded where the queue gzipped them). */
    async deliveredMessages(): Promise<Message[]> {
      const bodies = (await drain(queueUrl)).flatMap((e) =>
        e.Records.map((r) => JSON.parse(r.body) as unknown),
      );
      return (await Promise.all(bodies.map(expandedBody))) as Message[];
    },
    /**
     * Every message sent since the last call (on any of moto's queues), delayed or not, oldest
     * first. They stay in their queues (SQS allows one purge a minute): a test that takes them
     * does not also receive.
     */
    async takeAll(): Promise<Message[]> {
      const fresh = [...(await this.held()).values()]
        .filter((m) => !taken.has(m.id))
        .sort((a, b) => a.sentAt - b.sentAt);
      for (const m of fresh) taken.add(m.id);
      return (await Promise.all(fresh.map((m) => expandedBody(JSON.parse(m.body))))) as Message[];
    },
    /** The dead-letter queue's messages, taken off it. */
    async dead(): Promise<SqsRecord[]> {
      return (await drain(deadLetterQueueUrl)).flatMap((e) => e.Records);
    },
    /**
     * One batch as Lambda's SQS poller handles it (`ReportBatchItemFailures`): receive up to 10
     * messages (long-polling up to `waitTimeSeconds`), invoke `handler` with them, delete the
     * records not reported failed. Undefined when nothing arrived.
     */
    async poll(
      handler: (event: SqsEvent) => Promise<unknown>,
      waitTimeSeconds = 0,
    ): Promise<{ event: SqsEvent; failed: string[] } | undefined> {
      const records = await receive(queueUrl, waitTimeSeconds);
      if (records.length === 0) return undefined;
      const event = { Records: records };
      const response = (await handler(event)) as { batchItemFailures: { itemIdentifier: string }[] };
      const failed = response.batchItemFailures.map((f) => f.itemIdentifier);
      await remove(
        queueUrl,
        records.filter((r) => !failed.includes(r.messageId)),
      );
      return { event, failed };
    },
    /** Messages moto holds (sent since it started, deleted or not), by message id, as they are now. */
    async held(): Promise<Map<string, HeldMessage>> {
      const res = await fetch(`${endpoint}/moto-api/data.json`);
      const data = (await res.json()) as { sqs?: { Message?: MotoMessage[] } };
      // A receive hands out deep copies, which moto tracks too: the first instance of an id is
      // the message the queue holds.
      return new Map(
        (data.sqs?.Message ?? []).reverse().map((m) => [
          m.id,
          {
            id: m.id,
            body: m.body,
            delaySeconds: m.delayed_until ? Math.round((m.delayed_until - m.sent_timestamp) / 1000) : 0,
            sentAt: m.sent_timestamp,
            visibleAt: m.visible_at,
            receiveCount: m.approximate_receive_count,
            attributes: m.message_attributes,
          },
        ]),
      );
    },
    /** Every message of the queue, delayed or visible, removed (PurgeQueue). */
    async purge(): Promise<void> {
      await sqs.send(new PurgeQueueCommand({ QueueUrl: queueUrl }));
    },
    close() {
      sqs.destroy();
    },
  };
}

interface MotoMessage {
  id: string;
  body: string;
  sent_timestamp: number;
  delayed_until: number;
  visible_at: number;
  approximate_receive_count: number;
  message_attributes: unknown;
}

/** An SQS message as the event source mapping hands it to the function. */
function recordOf(m: SqsMessage, queueArn: string): SqsRecord & Record<string, unknown> {
  return {
    messageId: m.MessageId as string,
    receiptHandle: m.ReceiptHandle as string,
    body: m.Body as string,
    attributes: { ...(m.Attributes as Record<string, string>) },
    messageAttributes: Object.fromEntries(
      Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [
        k,
        { stringValue: v.StringValue, stringListValues: [], binaryListValues: [], dataType: v.DataType },
      ]),
    ),
    md5OfBody: m.MD5OfBody,
    eventSource: "aws:sqs",
    eventSourceARN: queueArn,
    awsRegion: REGION,
  };
}

export type KubefnAws = Awaited<ReturnType<typeof createKubefnAws>>;
