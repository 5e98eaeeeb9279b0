import type { Transport, TransportRequest } from "./port.ts";

export interface RecordedCall {
  method: TransportRequest["method"];
  path: string;
  /** HTTP status, or 0 when the transport threw. */
  status: number;
}

export interface CallCounts {
  /** GETs (get, list). */
  reads: number;
  /** Everything else (create, update, patch, delete). */
  writes: number;
}

export interface CountingTransport extends Transport {
  /** Every call since the last reset, in order. */
  calls(): readonly RecordedCall[];
  counts(): CallCounts;
  reset(): void;
}

/**
 * Wraps a transport and records each call — to count API calls per pass and to assert that a
 * steady-state pass writes nothing.
 *
 * Caveats: the record lives in this wrapper; create one per pass or test, never in module scope.
 */
export function countingTransport(inner: Transport): CountingTransport {
  let recorded: RecordedCall[] = [];
  return {
    async request(req) {
      const call: RecordedCall = { method: req.method, path: req.path, status: 0 };
      recorded.push(call);
      const res = await inner.request(req);
      call.status = res.status;
      return res;
    },
    calls: () => recorded,
    counts() {
      const reads = recorded.filter((c) => c.method === "GET").length;
      return { reads, writes: recorded.length - reads };
    },
    reset() {
      recorded = [];
    },
  };
}
