import {
  createServiceAccountTokenSource,
  type ServiceAccountKey,
  type TokenSource,
} from "../../../credentials/index.ts";
import { parseJsonOrUndefined } from "../../../guards/index.ts";
import { parseRetryAfter } from "../../../kube/index.ts";
import type { Clock } from "../../../runtime/index.ts";
import {
  adoptExisting,
  type CreateRequest,
  type DeleteGuard,
  type Instance,
  type InstanceState,
  isOwnedBy,
  managedByTagKey,
  ownerTagKey,
  type Provider,
  ProviderError,
  ProviderNotFoundError,
  requireOwnerTag,
  type Tag,
} from "./provider.ts";

export const computeBaseUrl = "https://compute.googleapis.com/compute/v1";
export const defaultGceImage = "projects/debian-cloud/global/images/family/debian-12";
export const defaultGceMachineType = "e2-micro";
const providerIdPrefix = "gce://";
const requestTimeoutMs = 30_000;

export interface GceProviderOptions {
  project: string;
  /** Zone of instances whose shape names none; also the zone `listByTag` searches by default. */
  zone: string;
  /**
   * Zones `listByTag` searches (instances.list per zone); defaults to `[zone]`. A Proxy may name
   * only these (GCE_ZONES, the allow-list's zones), so no instance of kubefn's is elsewhere.
   */
  listZones?: string[];
  /** A service-account key, exchanged for tokens by a token source private to this provider. */
  serviceAccountKey?: ServiceAccountKey;
  /** Or any other source of access tokens (e.g. the metadata server). Wins over the key. */
  tokenSource?: TokenSource;
  fetch?: typeof fetch;
  clock?: Clock;
  /** Defaults to {@link computeBaseUrl}; tests point it at a local server. */
  baseUrl?: string;
  defaultImage?: string;
  defaultMachineType?: string;
  /**
   * Network of the instance's interface: a name (`crawl-proxies`) or a partial URL. GCE's
   * `default` network when absent — which the settings never leave to chance (GCE_NETWORK is
   * required with GCE_PROJECT).
   */
  network?: string;
  /** Its subnetwork: a name (in the region of the instance's zone) or a partial URL. */
  subnetwork?: string;
  /** Network tags on every instance, for the operator's firewall rules. */
  networkTags?: string[];
}

/** The fields of a Compute Engine Instance the provider reads. */
export interface GceInstance {
  kind?: string;
  /** The instance's unique numeric id (a uint64 as a string). */
  id?: string;
  name: string;
  zone?: string;
  status?: string;
  creationTimestamp?: string;
  labels?: Record<string, string>;
  networkInterfaces?: { networkIP?: string; accessConfigs?: { natIP?: string }[] }[];
}

/** A zone Operation; only its error matters here (state is read later with instances.get). */
export interface GceOperation {
  kind?: string;
  status?: "PENDING" | "RUNNING" | "DONE";
  httpErrorStatusCode?: number;
  httpErrorMessage?: string;
  error?: { errors?: { code?: string; message?: string }[] };
}

/** Google's JSON error body. */
export interface GoogleErrorBody {
  error?: {
    code?: number;
    message?: string;
    status?: string;
    errors?: { reason?: string; domain?: string; message?: string }[];
    details?: { "@type"?: string; reason?: string }[];
  };
}

interface Answer {
  status: number;
  body: unknown;
  retryAfterSeconds: number | undefined;
}

/**
 * Compute Engine VMs through the Compute REST API v1, with `fetch` and Web Crypto only. The
 * providerID is "gce://{project}/{zone}/{name}".
 *
 * @example
 * const gce = createGceProvider({ project: "crawl-prod", zone: "europe-west1-b", serviceAccountKey: key });
 *
 * Caveats: `create` returns as soon as the insert Operation is accepted (state Provisioning); the
 * Operation is not polled — `get` reports progress. Labels are tags sanitised to GCE label rules
 * ("crawl.kubefn.dev/proxy-uid" is stored as "crawl_kubefn_dev_proxy-uid").
 */
export function createGceProvider(opts: GceProviderOptions): Provider {
  const doFetch = opts.fetch ?? fetch;
  const clock = opts.clock ?? { now: () => new Date() };
  const baseUrl = (opts.baseUrl ?? computeBaseUrl).replace(/\/+$/, "");
  const tokens = tokenSourceFrom(opts, doFetch, clock);
  const { project } = opts;
  const zonePath = (zone: string) => `/projects/${enc(project)}/zones/${enc(zone)}/instances`;

  async function call(method: "GET" | "POST" | "DELETE", path: string, what: string, body?: unknown) {
    const token = await tokens.token();
    let res: Response;
    try {
      res = await doFetch(`${baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          accept: "application/json",
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(requestTimeoutMs),
        // Never follow a redirect with the OAuth token.
        redirect: "manual",
      });
    } catch (err) {
      const timedOut = err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError");
      throw new ProviderError("transient", timedOut ? "Timeout" : "NetworkError", `${what}: ${String(err)}`, {
        cause: err,
      });
    }
    const text = await res.text();
    if (res.status === 401) tokens.invalidate();
    const answer: Answer = {
      status: res.status,
      body: parseJsonOrUndefined(text),
      retryAfterSeconds: parseRetryAfter(res.headers.get("retry-after"), clock.now().getTime()),
    };
    return answer;
  }

  /** Every page of a list call, following nextPageToken. */
  async function* listPages(path: string, filter: string): AsyncGenerator<unknown> {
    let pageToken: string | undefined;
    do {
      const query = new URLSearchParams({ filter, maxResults: "500" });
      if (pageToken) query.set("pageToken", pageToken);
      const what = `list ${path} with ${filter}`;
      const answer = await call("GET", `${path}?${query}`, what);
      if (!isOk(answer.status)) {
        throw gceErrorFrom(answer.status, answer.body, what, answer.retryAfterSeconds);
      }
      yield answer.body;
      pageToken = (answer.body as { nextPageToken?: string } | undefined)?.nextPageToken || undefined;
    } while (pageToken);
  }

  async function getByKey(key: GceKey, id: string): Promise<Instance> {
    const what = `get ${id}`;
    const answer = await call("GET", `${zonePath(key.zone)}/${enc(key.name)}`, what);
    if (answer.status === 404) throw new ProviderNotFoundError(id);
    if (!isOk(answer.status)) throw gceErrorFrom(answer.status, answer.body, what, answer.retryAfterSeconds);
    return instanceFromGce(project, key.zone, answer.body as GceInstance);
  }

  return {
    async create(req) {
      const owner = requireOwnerTag(req);
      const zone = req.instance.zone || opts.zone;
      const key = { project, zone, name: req.name };
      const id = gceProviderId(key);
      const body = buildInsertBody(req, {
        zone,
        image: opts.defaultImage ?? defaultGceImage,
        machineType: opts.defaultMachineType ?? defaultGceMachineType,
        network: opts.network,
        subnetwork: opts.subnetwork,
        networkTags: opts.networkTags,
      });
      const what = `insert ${id}`;
      const answer = await call("POST", zonePath(zone), what, body);
      let conflict = answer.status === 409;
      if (!conflict && !isOk(answer.status)) {
        throw gceErrorFrom(answer.status, answer.body, what, answer.retryAfterSeconds);
      }
      if (!conflict) {
        const opError = operationError(answer.body as GceOperation);
        if (opError && opError.status === 409) conflict = true;
        else if (opError) throw gceErrorFrom(opError.status, opError.body, what);
      }
      if (conflict) {
        try {
          return adoptExisting(await getByKey(key, id), sanitiseGceLabelValue(owner), req.name);
        } catch (err) {
          if (err instanceof ProviderNotFoundError) {
            throw new ProviderError("transient", "Conflict", `${id} vanished during create`, { cause: err });
          }
          throw err;
        }
      }
      return { id, state: "Provisioning", tags: canonicalTags(body.labels) };
    },

    async get(id, owner) {
      const instance = await getByKey(parseGceProviderId(id, project), id);
      if (!isOwnedBy(instance, owner, sanitiseGceLabelValue)) {
        throw new ProviderNotFoundError(id, { notOwnedBy: owner });
      }
      return instance;
    },

    async delete(id: string, guard: DeleteGuard) {
      const key = parseGceProviderId(id, project);
      const what = `delete ${id}`;
      // Read first: only an instance carrying the owner's tag (and, given a uid, that very
      // incarnation) is deleted. GCE has no delete precondition; a successor of the same name
      // cannot be inserted while this one is being deleted.
      let instance: Instance;
      try {
        instance = await getByKey(key, id);
      } catch (err) {
        if (err instanceof ProviderNotFoundError) return;
        throw err;
      }
      if (!isOwnedBy(instance, guard.owner, sanitiseGceLabelValue)) return;
      if (guard.uid !== undefined && instance.uid !== guard.uid) return;
      const answer = await call("DELETE", `${zonePath(key.zone)}/${enc(key.name)}`, what);
      if (answer.status === 404) return;
      if (!isOk(answer.status)) {
        throw gceErrorFrom(answer.status, answer.body, what, answer.retryAfterSeconds);
      }
      const opError = operationError(answer.body as GceOperation);
      if (opError && opError.status !== 404) throw gceErrorFrom(opError.status, opError.body, what);
    },

    async listByTag(tag: Tag) {
      const filter = labelFilter(tag);
      const zones = opts.listZones ?? [opts.zone];
      const instances: Instance[] = [];
      for (const zone of zones) {
        for await (const page of listPages(zonePath(zone), filter)) {
          const items = (page as { items?: GceInstance[] }).items ?? [];
          instances.push(...items.map((inst) => instanceFromGce(project, zone, inst)));
        }
      }
      return instances;
    },
  };
}

function tokenSourceFrom(opts: GceProviderOptions, doFetch: typeof fetch, clock: Clock): TokenSource {
  if (opts.tokenSource) return opts.tokenSource;
  if (opts.serviceAccountKey) {
    return createServiceAccountTokenSource({
      key: opts.serviceAccountKey,
      fetch: doFetch,
      clock,
      failure: (errorClass, reason, message, o) => new ProviderError(errorClass, reason, message, o),
    });
  }
  throw new TypeError("createGceProvider: serviceAccountKey or tokenSource is required");
}

export interface InsertDefaults {
  zone: string;
  image: string;
  machineType: string;
  network?: string | undefined;
  subnetwork?: string | undefined;
  networkTags?: string[] | undefined;
}

/**
 * Instance metadata kubefn sets on every VM: project-wide SSH keys grant no login on it (a VM
 * running a tenant's cloud-init is no place for the project's keys).
 */
export const gceInstanceMetadata = [{ key: "block-project-ssh-keys", value: "TRUE" }];

/**
 * The body of instances.insert. Pure. The VM keeps its external address (crawlers reach it
 * there) in the operator's network, with the operator's network tags, no service account (the
 * metadata server hands out no token), and no project-wide SSH keys.
 *
 * Caveats: the user-data (the tenant's cloud-init) is instance metadata: anyone who may
 * `compute.instances.get` in the project reads it, and every process on the VM reads it and the
 * project's metadata from the metadata server, which no firewall rule blocks.
 */
export function buildInsertBody(req: CreateRequest, defaults: InsertDefaults) {
  const machineType = req.instance.machineType || defaults.machineType;
  const networkInterface = {
    ...(defaults.network ? { network: gceNetworkPath(defaults.network) } : {}),
    ...(defaults.subnetwork ? { subnetwork: gceSubnetworkPath(defaults.subnetwork, defaults.zone) } : {}),
    accessConfigs: [{ type: "ONE_TO_ONE_NAT", name: "External NAT" }],
  };
  return {
    name: req.name,
    machineType: machineType.includes("/")
      ? machineType
      : `zones/${defaults.zone}/machineTypes/${machineType}`,
    disks: [
      {
        boot: true,
        autoDelete: true,
        initializeParams: { sourceImage: req.instance.image || defaults.image },
      },
    ],
    networkInterfaces: [networkInterface],
    ...(defaults.networkTags?.length ? { tags: { items: [...defaults.networkTags] } } : {}),
    serviceAccounts: [],
    // Tags last, each sanitised apart: a tenant's key sanitising to a tag's must not overwrite it.
    labels: { ...sanitiseGceLabels(req.instance.labels ?? {}), ...sanitiseGceLabels(req.tags) },
    metadata: {
      items: [
        ...gceInstanceMetadata,
        ...(req.cloudInit === undefined ? [] : [{ key: "user-data", value: req.cloudInit }]),
      ],
    },
  };
}

/** `crawl-proxies` → `global/networks/crawl-proxies`; a path is kept. Pure. */
export function gceNetworkPath(network: string): string {
  return network.includes("/") ? network : `global/networks/${network}`;
}

/** `proxies` in zone `europe-west1-b` → `regions/europe-west1/subnetworks/proxies`; a path is kept. Pure. */
export function gceSubnetworkPath(subnetwork: string, zone: string): string {
  return subnetwork.includes("/")
    ? subnetwork
    : `regions/${zone.replace(/-[a-z]$/, "")}/subnetworks/${subnetwork}`;
}

/** What a Compute Engine Instance means as an instance. Pure. */
export function instanceFromGce(project: string, zone: string, inst: GceInstance): Instance {
  const state = gceState(inst.status);
  const nic = inst.networkInterfaces?.[0];
  // The external address when there is one; else the internal one (an operator inside the VPC).
  const ip = state === "Running" ? nic?.accessConfigs?.[0]?.natIP || nic?.networkIP : undefined;
  const instanceZone = inst.zone ? (inst.zone.split("/").pop() ?? zone) : zone;
  return {
    id: gceProviderId({ project, zone: instanceZone, name: inst.name }),
    state,
    ...(ip ? { ip } : {}),
    tags: canonicalTags(inst.labels ?? {}),
    ...(inst.id ? { uid: String(inst.id) } : {}),
    ...(inst.creationTimestamp ? { createdAt: inst.creationTimestamp } : {}),
  };
}

function gceState(status: string | undefined): InstanceState {
  switch (status) {
    case "RUNNING":
      return "Running";
    case "STOPPING":
    case "SUSPENDING":
    case "SUSPENDED":
    case "TERMINATED":
    case "PENDING_STOP":
      return "Stopped";
    default:
      // PROVISIONING, STAGING, REPAIRING, and anything newer: keep polling.
      return "Provisioning";
  }
}

interface GceKey {
  project: string;
  zone: string;
  name: string;
}

export function gceProviderId(key: GceKey): string {
  return `${providerIdPrefix}${key.project}/${key.zone}/${key.name}`;
}

/** Parses "gce://project/zone/name"; an ID of another project is refused. */
export function parseGceProviderId(id: string, project: string): GceKey {
  const rest = id.startsWith(providerIdPrefix) ? id.slice(providerIdPrefix.length) : undefined;
  const [p, zone, name, extra] = rest?.split("/") ?? [];
  if (!p || !zone || !name || extra !== undefined) {
    throw new ProviderError("permanent", "InvalidProviderID", `not a gce providerID: ${JSON.stringify(id)}`);
  }
  if (p !== project) {
    throw new ProviderError("permanent", "InvalidProviderID", `${id} is not in project ${project}`);
  }
  return { project: p, zone, name };
}

/** The instances.list filter for one label, e.g. `labels.crawl_kubefn_dev_managed-by="kubefn"`. */
export function labelFilter(tag: Tag): string {
  return `labels.${sanitiseGceLabelKey(tag.key)}=${JSON.stringify(sanitiseGceLabelValue(tag.value))}`;
}

const quotaReasons = new Set([
  "quotaExceeded",
  "QUOTA_EXCEEDED",
  "ZONE_RESOURCE_POOL_EXHAUSTED",
  "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
]);
const rateLimitReasons = new Set(["rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED"]);
const unavailableReasons = new Set([
  "backendError",
  "internalError",
  "resourceNotReady",
  "RESOURCE_NOT_READY",
]);

/**
 * Classifies a Google API error answer. Pure.
 *
 * | answer | class | reason |
 * | --- | --- | --- |
 * | reason quotaExceeded / QUOTA_EXCEEDED, RESOURCE_EXHAUSTED about quota | quota | QuotaExceeded |
 * | ZONE_RESOURCE_POOL_EXHAUSTED (stockout) | quota | ZoneResourcePoolExhausted |
 * | reason rateLimitExceeded, userRateLimitExceeded; 429 | transient | RateLimited |
 * | backendError, internalError, resourceNotReady; 5xx, 408 | transient | Unavailable |
 * | 401 (the token is dropped) | transient | Unauthenticated |
 * | 409 | transient | Conflict |
 * | 403 | permanent | Forbidden |
 * | 404 | permanent | NotFound |
 * | 400, INVALID_ARGUMENT, other 4xx | permanent | Invalid |
 *
 * Caveats: a 404 where absence is an answer (instances.get, delete) is handled before this.
 */
export function gceErrorFrom(
  status: number,
  body: unknown,
  what: string,
  retryAfterSeconds?: number,
): ProviderError {
  const error = (body as GoogleErrorBody | undefined)?.error;
  const reasons = [
    ...(error?.errors ?? []).map((e) => e.reason),
    ...(error?.details ?? []).map((d) => d.reason),
  ];
  const has = (set: ReadonlySet<string>) => reasons.some((r) => r !== undefined && set.has(r));
  const message = `${what}: ${status} ${error?.message ?? "(no error body)"}`;
  const make = (errorClass: "quota" | "permanent" | "transient", reason: string) =>
    new ProviderError(errorClass, reason, message, { retryAfterSeconds });

  if (reasons.some((r) => r?.startsWith("ZONE_RESOURCE_POOL_EXHAUSTED"))) {
    return make("quota", "ZoneResourcePoolExhausted");
  }
  if (has(quotaReasons)) return make("quota", "QuotaExceeded");
  if (has(rateLimitReasons)) return make("transient", "RateLimited");
  if (error?.status === "RESOURCE_EXHAUSTED" && /quota/i.test(error.message ?? "")) {
    return make("quota", "QuotaExceeded");
  }
  if (status === 429) return make("transient", "RateLimited");
  if (has(unavailableReasons) || status >= 500 || status === 408) return make("transient", "Unavailable");
  if (status === 401) return make("transient", "Unauthenticated");
  if (status === 409) return make("transient", "Conflict");
  if (status === 403) return make("permanent", "Forbidden");
  if (status === 404) return make("permanent", "NotFound");
  return make("permanent", "Invalid");
}

/**
 * The error of a finished Operation, as an HTTP status and a Google error body (operation error
 * `code`s become `reason`s), or undefined when it has none.
 */
export function operationError(
  op: GceOperation | undefined,
): { status: number; body: GoogleErrorBody } | undefined {
  const errors = op?.error?.errors;
  if (op?.status !== "DONE" || !errors || errors.length === 0) return undefined;
  const alreadyExists = errors.some((e) => e.code === "RESOURCE_ALREADY_EXISTS");
  const status = alreadyExists ? 409 : (op.httpErrorStatusCode ?? 400);
  const message = errors.map((e) => `${e.code}: ${e.message}`).join("; ");
  return {
    status,
    body: {
      error: { code: status, message, errors: errors.map((e) => ({ reason: e.code, message: e.message })) },
    },
  };
}

const gceLabelMax = 63;

/** A GCE label key: lowercase letters, digits, "_" and "-", starting with a letter, ≤ 63. */
export function sanitiseGceLabelKey(key: string): string {
  const s = key.toLowerCase().replace(/[^a-z0-9_-]/g, "_");
  return (/^[a-z]/.test(s) ? s : `k${s}`).slice(0, gceLabelMax);
}

/** A GCE label value: lowercase letters, digits, "_" and "-", ≤ 63 (may be empty). */
export function sanitiseGceLabelValue(value: string): string {
  return value
    .toLowerCase()
    .replace(/[^a-z0-9_-]/g, "_")
    .slice(0, gceLabelMax);
}

export function sanitiseGceLabels(labels: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(labels)) {
    if (key !== "") out[sanitiseGceLabelKey(key)] = sanitiseGceLabelValue(value);
  }
  return out;
}

const canonicalKeys = new Map([ownerTagKey, managedByTagKey].map((k) => [sanitiseGceLabelKey(k), k]));

/** Stored labels with kubefn's own tag keys restored to their canonical form. */
function canonicalTags(labels: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(labels)) out[canonicalKeys.get(key) ?? key] = value;
  return out;
}

function isOk(status: number): boolean {
  return status >= 200 && status < 300;
}

function enc(segment: string): string {
  return encodeURIComponent(segment);
}
