import {
  coalesce,
  type Message,
  type Metrics,
  messageController,
  messageKey,
  type Queue,
} from "../../shared/app/index.ts";

export interface WorkQueueOptions {
  /** Passes running at once, across keys. */
  concurrency: number;
  /**
   * Probe shards running at once, beside the passes (default 16). A shard spreads its probes
   * over a second and the prober bounds the connections of all of them together; sharing the
   * passes' few slots would cap a host at a few shards a second (9,000 probed objects at 30 s need
   * about 8 at once) and keep the passes waiting behind them.
   */
  shardConcurrency?: number;
  /**
   * Runs one pass. `batch` is the same object for every message of one `send` (an intake batch,
   * a sweep shard), as a platform's queue batch is: its passes may share reads. Failures are the
   * handler's to report; a throw is logged and dropped.
   */
  handle(message: Message, batch: object): Promise<void>;
  onError?(err: unknown, message: Message): void;
  /**
   * Where client-go's workqueue families go (`workqueue_adds_total`, `workqueue_queue_duration_seconds`,
   * `workqueue_work_duration_seconds`, labelled `name`: the message's controller); depth is read
   * with {@link WorkQueue.depthByName} at scrape time.
   */
  metrics?: Pick<Metrics, "count" | "observe">;
  /** Milliseconds, for the queue's durations (default `performance.now`). */
  now?: () => number;
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (handle: unknown) => void;
}

/** A message, the `send` it came with, and when it became ready (ms, for the queue duration). */
interface Entry {
  message: Message;
  batch: object;
  readyAt?: number;
}

interface Delayed extends Entry {
  dueAt: number;
  handle: unknown;
}

/**
 * The Node host's in-process queue. It gives what controller-runtime's workqueue gives and a
 * serverless queue does not: a key never has two passes at once, messages for a key that is
 * waiting or running collapse into one, and a delayed follow-up is kept only if it is the
 * earliest for its key.
 *
 * Caveats: nothing survives the process. That is by design: every message is an optimisation,
 * and the sweep revisits every object within its drift interval.
 */
export class WorkQueue implements Queue {
  readonly #opts: Required<Omit<WorkQueueOptions, "onError" | "metrics">> &
    Pick<WorkQueueOptions, "onError" | "metrics">;
  readonly #ready = new Map<string, Entry>();
  readonly #readyShards = new Map<string, Entry>();
  #runningShards = 0;
  readonly #running = new Set<string>();
  /** Keys that got a message while running: they run once more when the pass ends. */
  readonly #dirty = new Map<string, Entry>();
  readonly #delayed = new Map<string, Delayed>();
  /** Every controller that had a message: its depth reads 0 once its messages are gone. */
  readonly #names = new Set<string>();
  readonly #idleWaiters: Array<() => void> = [];
  #closed = false;

  constructor(opts: WorkQueueOptions) {
    this.#opts = {
      setTimer: (fn, ms) => setTimeout(fn, ms),
      clearTimer: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
      shardConcurrency: 16,
      now: () => performance.now(),
      ...opts,
    };
  }

  async send(messages: Message[], delaySeconds = 0): Promise<void> {
    const batch = {};
    for (const message of messages) {
      if (delaySeconds > 0) this.#delay({ message, batch }, delaySeconds * 1000);
      else this.#enqueue({ message, batch });
    }
  }

  /** Counts for metrics and the status line. */
  stats(): { ready: number; running: number; delayed: number } {
    return {
      ready: this.#ready.size + this.#readyShards.size,
      running: this.#running.size,
      delayed: this.#delayed.size,
    };
  }

  /**
   * Messages waiting per controller, as client-go's `workqueue_depth` counts them: ready, and
   * come again while their key runs (0 for a controller seen before). Walks the waiting messages;
   * for scrapes, not passes.
   */
  depthByName(): Map<string, number> {
    const depth = new Map<string, number>([...this.#names].map((name) => [name, 0]));
    for (const lane of [this.#ready, this.#readyShards, this.#dirty])
      for (const { message } of lane.values())
        depth.set(messageController(message), (depth.get(messageController(message)) ?? 0) + 1);
    return depth;
  }

  /** Resolves when nothing is ready or running (delayed messages may remain). */
  idle(): Promise<void> {
    if (this.#ready.size === 0 && this.#readyShards.size === 0 && this.#running.size === 0)
      return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Stops accepting work and cancels delayed messages; running passes finish. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const d of this.#delayed.values()) this.#opts.clearTimer(d.handle);
    this.#delayed.clear();
    this.#ready.clear();
    this.#readyShards.clear();
    await this.idle();
  }

  #delay({ message, batch }: Entry, ms: number): void {
    if (this.#closed) return;
    const key = messageKey(message);
    const dueAt = Date.now() + ms;
    const existing = this.#delayed.get(key);
    if (existing && existing.dueAt <= dueAt) {
      existing.message = coalesce(message, existing.message);
      return;
    }
    if (existing) this.#opts.clearTimer(existing.handle);
    const entry: Delayed = {
      dueAt,
      handle: undefined,
      message: existing ? coalesce(existing.message, message) : message,
      batch,
    };
    entry.handle = this.#opts.setTimer(() => {
      this.#delayed.delete(key);
      this.#enqueue(entry);
    }, ms);
    this.#delayed.set(key, entry);
  }

  #enqueue(entry: Entry): void {
    if (this.#closed) return;
    const key = messageKey(entry.message);
    const waiting = this.#running.has(key) ? this.#dirty : this.#laneOf(entry);
    const earlier = waiting.get(key);
    // A message that joins one already waiting keeps that one's place, batch and time (client-go
    // counts an add only when the key was not waiting).
    if (earlier) waiting.set(key, { ...earlier, message: coalesce(earlier.message, entry.message) });
    else {
      waiting.set(key, { message: entry.message, batch: entry.batch, readyAt: this.#opts.now() });
      this.#names.add(messageController(entry.message));
      this.#opts.metrics?.count("workqueue_adds_total", { name: messageController(entry.message) });
    }
    if (waiting !== this.#dirty) this.#pump();
  }

  #laneOf(entry: Entry): Map<string, Entry> {
    return entry.message.kind === "job" ? this.#readyShards : this.#ready;
  }

  #pump(): void {
    for (const [key, entry] of this.#readyShards) {
      if (this.#runningShards >= this.#opts.shardConcurrency) break;
      this.#readyShards.delete(key);
      this.#runningShards++;
      this.#start(key, entry);
    }
    for (const [key, entry] of this.#ready) {
      if (this.#running.size - this.#runningShards >= this.#opts.concurrency) break;
      this.#ready.delete(key);
      this.#start(key, entry);
    }
    if (this.#running.size === 0) for (const wake of this.#idleWaiters.splice(0)) wake();
  }

  #start(key: string, entry: Entry): void {
    this.#running.add(key);
    void this.#run(key, entry);
  }

  async #run(key: string, { message, batch, readyAt }: Entry): Promise<void> {
    const metrics = this.#opts.metrics;
    const started = metrics ? this.#opts.now() : 0;
    const name = metrics ? { name: messageController(message) } : undefined;
    if (metrics && readyAt !== undefined)
      metrics.observe("workqueue_queue_duration_seconds", (started - readyAt) / 1000, name);
    try {
      await this.#opts.handle(message, batch);
    } catch (err) {
      this.#opts.onError?.(err, message);
    } finally {
      if (metrics)
        metrics.observe("workqueue_work_duration_seconds", (this.#opts.now() - started) / 1000, name);
      this.#running.delete(key);
      if (message.kind === "job") this.#runningShards--;
      const again = this.#dirty.get(key);
      if (again) {
        this.#dirty.delete(key);
        this.#laneOf(again).set(key, again);
      }
      this.#pump();
    }
  }
}
