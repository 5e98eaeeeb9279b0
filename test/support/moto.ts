/**
 * moto's server (PyPI `moto[server]`, installed into .tools/venv by scripts/python-tools.sh, which
 * `npm test` runs) on a free loopback port, standing in for EventBridge, EventBridge Scheduler,
 * SQS and Secrets Manager. It checks each call's shape, keeps what was created and routes bus
 * events through rules; it does not run schedules, so a test delivers a schedule's input itself,
 * as Scheduler would at the due time.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import {
  CreateEventBusCommand,
  EventBridgeClient,
  PutRuleCommand,
  PutTargetsCommand,
} from "@aws-sdk/client-eventbridge";
import {
  CreateScheduleGroupCommand,
  DeleteScheduleCommand,
  GetScheduleCommand,
  type GetScheduleCommandOutput,
  paginateListSchedules,
  SchedulerClient,
} from "@aws-sdk/client-scheduler";
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { parse } from "yaml";
import type { Message } from "../../shared/runtime/index.ts";

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

/** A `kubefn.reconcile` event as the function receives it: from the bus, or a schedule's input. */
export interface DeliveredEvent {
  source: string;
  "detail-type": string;
  detail: { messages: Message[] };
}

/** A one-time schedule as Scheduler holds it, its target's input parsed. */
export interface HeldSchedule {
  name: string;
  expression: string;
  output: GetScheduleCommandOutput;
  input: DeliveredEvent;
}

// CloudFormation's short tags (!Ref, …) are kept as the plain values they tag.
const template = parse(readFileSync(new URL("../../infra/aws/template.yaml", import.meta.url), "utf8"), {
  logLevel: "error",
}) as {
  Resources: Record<
    string,
    { Properties?: { Events?: Record<string, { Properties?: { Pattern?: unknown } }> } }
  >;
};

/** The event pattern of the function's `Reconcile` rule in infra/aws/template.yaml. */
export function reconcilePattern(): unknown {
  for (const resource of Object.values(template.Resources)) {
    const pattern = resource.Properties?.Events?.Reconcile?.Properties?.Pattern;
    if (pattern) return pattern;
  }
  throw new Error("infra/aws/template.yaml has no Events.Reconcile rule");
}

/**
 * kubefn's bus and schedule group in moto as infra/aws/template.yaml makes them: the bus with the
 * template's `Reconcile` rule, whose target here is an SQS queue standing in for the function (it
 * receives the same EventBridge envelope), and the schedule group delayed follow-ups go to.
 */
export async function createKubefnAws(
  endpoint: string,
  names: { eventBusName: string; scheduleGroup: string } = {
    eventBusName: "kubefn",
    scheduleGroup: "kubefn",
  },
) {
  const aws = {
    region: REGION,
    endpoint,
    credentials: { accessKeyId: "AKIDKUBEFNTEST", secretAccessKey: "x" },
  };
  const events = new EventBridgeClient(aws);
  const scheduler = new SchedulerClient(aws);
  const sqs = new SQSClient(aws);
  const { eventBusName, scheduleGroup } = names;
  await events.send(new CreateEventBusCommand({ Name: eventBusName }));
  await scheduler.send(new CreateScheduleGroupCommand({ Name: scheduleGroup }));
  const queue = await sqs.send(new CreateQueueCommand({ QueueName: `${eventBusName}-function` }));
  const queueUrl = queue.QueueUrl as string;
  const attrs = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["QueueArn"] }),
  );
  await events.send(
    new PutRuleCommand({
      Name: "reconcile",
      EventBusName: eventBusName,
      EventPattern: JSON.stringify(reconcilePattern()),
    }),
  );
  await events.send(
    new PutTargetsCommand({
      Rule: "reconcile",
      EventBusName: eventBusName,
      Targets: [{ Id: "function", Arn: attrs.Attributes?.QueueArn }],
    }),
  );

  async function schedules(): Promise<HeldSchedule[]> {
    const out: HeldSchedule[] = [];
    for await (const page of paginateListSchedules({ client: scheduler }, { GroupName: scheduleGroup })) {
      for (const s of page.Schedules ?? []) {
        const output = await scheduler.send(
          new GetScheduleCommand({ GroupName: scheduleGroup, Name: s.Name }),
        );
        out.push({
          name: s.Name as string,
          expression: output.ScheduleExpression as string,
          output,
          input: JSON.parse(output.Target?.Input ?? "null") as DeliveredEvent,
        });
      }
    }
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  return {
    eventBusName,
    scheduleGroup,
    /** Bus events the `Reconcile` rule routed to the function since the last call, oldest first. */
    async delivered(): Promise<DeliveredEvent[]> {
      const out: DeliveredEvent[] = [];
      for (;;) {
        const got = await sqs.send(
          new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10 }),
        );
        const batch = got.Messages ?? [];
        if (batch.length === 0) return out;
        out.push(...batch.map((m) => JSON.parse(m.Body as string) as DeliveredEvent));
        await sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: queueUrl,
            Entries: batch.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
          }),
        );
      }
    },
    /** The messages of {@link delivered}, flattened. */
    async deliveredMessages(): Promise<Message[]> {
      return (await this.delivered()).flatMap((e) => e.detail.messages);
    },
    /** The group's one-time schedules, by name. */
    schedules,
    /**
     * Takes the group's schedules, as Scheduler does when they run (`ActionAfterCompletion:
     * DELETE`): each schedule's input, the event the function then receives.
     */
    async fire(): Promise<HeldSchedule[]> {
      const held = await schedules();
      for (const s of held)
        await scheduler.send(new DeleteScheduleCommand({ GroupName: scheduleGroup, Name: s.name }));
      return held;
    },
    close() {
      events.destroy();
      scheduler.destroy();
      sqs.destroy();
    },
  };
}

export type KubefnAws = Awaited<ReturnType<typeof createKubefnAws>>;
