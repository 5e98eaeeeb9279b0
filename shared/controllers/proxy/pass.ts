import type { ProbeAllowList } from "../../health/index.ts";
import type { KubeObject } from "../../kube/index.ts";
import type { PassContext } from "../../runtime/index.ts";
import type { InstanceAllowList } from "./allow-list.ts";
import type { Proxy as ProxyObject, ProxyStatus } from "./api.ts";
import type { ProvidersByName } from "./providers/index.ts";
import type { ProxyTimings } from "./timings.ts";

/** Everything one branch of a pass works on. */
export interface ProxyPass {
  ctx: PassContext;
  /** The executor's private copy: metadata writes update it, `status` is the same object as below. */
  object: KubeObject;
  /** The parsed object, spec defaults applied. Read its spec; never write through it. */
  proxy: ProxyObject;
  /** `object.status`, mutated in place; the executor writes it once if it changed. */
  status: ProxyStatus;
  providers: ProvidersByName;
  /** What a Proxy may ask its instance to run (Managed). */
  allowList: InstanceAllowList;
  /** Loopback and private endpoints an External Proxy may name (`PROBE_ALLOWED_CIDRS`). */
  probeAllowList: ProbeAllowList;
  timings: ProxyTimings;
}
