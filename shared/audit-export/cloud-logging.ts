import { isRecord } from "../guards/index.ts";
/**
 * GKE's Kubernetes audit records as Cloud Logging writes them: a `LogEntry` whose `protoPayload`
 * is a `google.cloud.audit.AuditLog` from service `k8s.io`:
 *
 * ```json
 * { "logName": "projects/p/logs/cloudaudit.googleapis.com%2Factivity",
 *   "resource": { "type": "k8s_cluster", "labels": { "cluster_name": "prod", … } },
 *   "operation": { "id": "<auditID>", "producer": "k8s.io", "first": true, "last": true },
 *   "protoPayload": { "@type": "type.googleapis.com/google.cloud.audit.AuditLog", "serviceName": "k8s.io",
 *     "methodName": "io.k8s.core.v1.secrets.update",
 *     "resourceName": "core/v1/namespaces/ns/secrets/name",
 *     "authenticationInfo": { "principalEmail": "alice@example.com" },
 *     "status": {}, "request": { "@type": "core.k8s.io/v1.Secret", … }, "response": { … } } }
 * ```
 *
 * `methodName` is `<reversed API group>.<version>.<resource>[.<subresource>].<verb>`
 * (`io.k8s.core.v1.…` for the core group, `io.k8s.authorization.rbac.v1.…` for
 * rbac.authorization.k8s.io); only the part after the version is read, the group comes from
 * `resourceName`, which is
 * `<group>/<version>/[namespaces/<ns>/]<resource>[/<name>[/<subresource>]]`, `core` for the core
 * group. `status` is a `google.rpc.Status`: empty or code 0 is success. Custom resources are
 * logged at Metadata level: no `request` nor `response`.
 */

/** What one LogEntry became: an audit Event to map, or why it is not one. */
export type LogEntryReading = { event: Record<string, unknown> } | { skip: string };

/**
 * Reads a GKE audit LogEntry as the audit.k8s.io/v1 Event the API server wrote, so that it maps
 * through the same event mapping as the audit webhook: `objectRef` from `resourceName`, `verb`
 * from `methodName`, `user.username` from `authenticationInfo.principalEmail`, `responseStatus`
 * from `status` (success → 200, any failure → 500), bodies from `request`/`response`
 * (without their `@type`). Cloud Logging records only completed requests: stage ResponseComplete.
 *
 * Caveats: a create logged with the collection as `resourceName` (a `generateName` create) takes
 * its name from the response body; at Metadata level it has none and is skipped (the sweep finds
 * the object).
 */
export function auditEventFromLogEntry(entry: unknown): LogEntryReading {
  if (!isRecord(entry)) return { skip: "the LogEntry is not a JSON object" };
  const payload = entry.protoPayload;
  if (!isRecord(payload)) return { skip: "the LogEntry has no protoPayload" };
  if (payload.serviceName !== undefined && payload.serviceName !== "k8s.io") {
    return { skip: `service ${String(payload.serviceName)} is not k8s.io` };
  }
  const { methodName, resourceName } = payload;
  if (typeof methodName !== "string" || typeof resourceName !== "string") {
    return { skip: "protoPayload needs methodName and resourceName" };
  }
  const ref = objectRefOf(methodName, resourceName);
  if ("skip" in ref) return ref;
  const status = isRecord(payload.status) ? payload.status : {};
  const rpcCode = typeof status.code === "number" ? status.code : 0;
  const request = bodyOf(payload.request);
  const response = bodyOf(payload.response);
  const auth = isRecord(payload.authenticationInfo) ? payload.authenticationInfo : {};
  const operation = isRecord(entry.operation) ? entry.operation : {};
  const event: Record<string, unknown> = {
    kind: "Event",
    apiVersion: "audit.k8s.io/v1",
    level: request || response ? "RequestResponse" : "Metadata",
    auditID: typeof operation.id === "string" ? operation.id : (entry.insertId ?? ""),
    stage: "ResponseComplete",
    verb: ref.verb,
    user: typeof auth.principalEmail === "string" ? { username: auth.principalEmail } : {},
    objectRef: ref.objectRef,
    // Only success or failure matters to the mapping; the failure's own code stays in the log.
    responseStatus: { code: rpcCode === 0 ? 200 : 500 },
    ...(request ? { requestObject: request } : {}),
    ...(response ? { responseObject: response } : {}),
    requestReceivedTimestamp: entry.timestamp,
    stageTimestamp: entry.timestamp,
  };
  return { event };
}

interface ParsedRef {
  verb: string;
  objectRef: Record<string, string>;
}

function objectRefOf(methodName: string, resourceName: string): ParsedRef | { skip: string } {
  const parts = resourceName.split("/");
  const [groupPart, version, ...rest] = parts;
  if (!groupPart || !version || rest.length === 0 || rest.some((p) => p === "")) {
    return { skip: `resourceName ${resourceName} is not <group>/<version>/…` };
  }
  // methodName after the version: <resource>[.<subresource>].<verb>
  const at = methodName.indexOf(`.${version}.`);
  const tail = at < 0 ? [] : methodName.slice(at + version.length + 2).split(".");
  if (tail.length < 2 || tail.length > 3) {
    return { skip: `methodName ${methodName} does not name <resource>.<verb> after ${version}` };
  }
  const resource = tail[0]!;
  const verb = tail.at(-1)!;
  const subresource = tail.length === 3 ? tail[1]! : undefined;
  let namespace: string | undefined;
  let path = rest;
  if (rest[0] === "namespaces" && rest.length >= 3 && rest[2] === resource) {
    namespace = rest[1];
    path = rest.slice(2);
  }
  if (path[0] !== resource) {
    return { skip: `resourceName ${resourceName} does not match methodName ${methodName}` };
  }
  const name = path[1];
  const objectRef: Record<string, string> = {
    resource,
    apiGroup: groupPart === "core" ? "" : groupPart,
    apiVersion: version,
  };
  if (namespace !== undefined) objectRef.namespace = namespace;
  if (name !== undefined) objectRef.name = name;
  if (subresource !== undefined) objectRef.subresource = subresource;
  return { verb, objectRef };
}

/** A request/response body without its `@type` (e.g. "core.k8s.io/v1.Pod"). */
function bodyOf(value: unknown): Record<string, unknown> | undefined {
  if (!isRecord(value)) return undefined;
  const { "@type": _type, ...body } = value;
  return Object.keys(body).length > 0 ? body : undefined;
}

/**
 * Builds the LogEntry Cloud Logging writes for an audit Event. For tests and fixtures: it is the
 * inverse of {@link auditEventFromLogEntry}, with `metadataOnly` dropping the bodies as GKE does
 * for custom resources.
 */
export function logEntryFromAuditEvent(
  event: Record<string, unknown>,
  options: { cluster: string; project: string; metadataOnly?: boolean },
): Record<string, unknown> {
  const ref = (isRecord(event.objectRef) ? event.objectRef : {}) as Record<string, string | undefined>;
  const group = ref.apiGroup ? ref.apiGroup : "core";
  // Built-in groups without a domain are k8s.io's: "apps" → "io.k8s.apps".
  const methodGroup = !ref.apiGroup
    ? "io.k8s.core"
    : ref.apiGroup.includes(".")
      ? ref.apiGroup.split(".").reverse().join(".")
      : `io.k8s.${ref.apiGroup}`;
  const method = [methodGroup, ref.apiVersion, ref.resource, ref.subresource, event.verb]
    .filter((x) => x !== undefined && x !== "")
    .join(".");
  const resourceName = [
    group,
    ref.apiVersion,
    ...(ref.namespace ? ["namespaces", ref.namespace] : []),
    ref.resource,
    ref.name,
    ref.subresource,
  ]
    .filter((x) => x !== undefined && x !== "")
    .join("/");
  const code = isRecord(event.responseStatus) ? Number(event.responseStatus.code) : 200;
  const kindOf = (body: unknown) =>
    isRecord(body) ? `${group}.k8s.io/${ref.apiVersion}.${String(body.kind ?? "")}` : "";
  const typed = (body: unknown) =>
    !options.metadataOnly && isRecord(body) ? { "@type": kindOf(body), ...body } : undefined;
  const request = typed(event.requestObject);
  const response = typed(event.responseObject);
  const user = isRecord(event.user) ? event.user : {};
  return {
    insertId: `${String(event.auditID)}-0`,
    logName: `projects/${options.project}/logs/cloudaudit.googleapis.com%2Factivity`,
    resource: {
      type: "k8s_cluster",
      labels: { project_id: options.project, location: "europe-west1", cluster_name: options.cluster },
    },
    timestamp: event.stageTimestamp,
    receiveTimestamp: event.stageTimestamp,
    severity: code >= 200 && code < 300 ? "NOTICE" : "ERROR",
    operation: { id: event.auditID, producer: "k8s.io", first: true, last: true },
    protoPayload: {
      "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
      serviceName: "k8s.io",
      methodName: method,
      resourceName,
      authenticationInfo: { principalEmail: user.username },
      authorizationInfo: [{ granted: true, permission: method, resource: resourceName }],
      requestMetadata: {
        callerIp: Array.isArray(event.sourceIPs) ? event.sourceIPs[0] : "203.0.113.9",
        callerSuppliedUserAgent: event.userAgent,
      },
      status:
        code >= 200 && code < 300 ? {} : { code: code === 409 ? 6 : code === 404 ? 5 : 13, message: "" },
      ...(request ? { request } : {}),
      ...(response ? { response } : {}),
    },
  };
}
