/**
 * Probe-target screening: a Proxy's address and probe URL come from users, and the functions run
 * next to cloud metadata services and the cluster's own network. Before any connection is opened,
 * the host is checked against the addresses a probe must never reach unless an operator
 * explicitly allows them (`PROBE_ALLOWED_CIDRS`, see {@link parseProbeAllowList}). Otherwise
 * Ready/Unhealthy and the latency would answer a tenant's questions about the internal network.
 *
 * Always refused: IPv4 link-local 169.254.0.0/16 (169.254.169.254 is the AWS/GCP/Azure/OpenStack
 * metadata service; 169.254.170.2 and 169.254.170.23 the ECS/EKS credential endpoints), Azure's
 * WireServer 168.63.129.16, IPv6 link-local fe80::/10, the EC2 IPv6 metadata and pod-identity
 * addresses fd00:ec2::254 / fd00:ec2::23, the Alibaba metadata address 100.100.100.200, the
 * metadata host names, and the unspecified addresses 0.0.0.0/8 and ::.
 *
 * Refused where a tenant wrote the host (an External endpoint, every probe URL), allowed where
 * kubefn's own provider gave it (a Managed instance's address, `trusted`): loopback 127.0.0.0/8,
 * ::1 and `localhost`; the private ranges 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, the shared
 * address space 100.64.0.0/10 and fc00::/7.
 *
 * Every IPv4 spelling `inet_aton` accepts (decimal, hex and octal integers and parts, 1 to 4
 * parts) and the IPv4-mapped, IPv4-compatible and NAT64 IPv6 forms are decoded first. Hosts are
 * checked as a URL parser reads them (see `canonicalHost`), so IDNA spellings (full-width dots,
 * circled digits) of a refused address are refused too, and anything that is not a host alone
 * (user info, a port, a path) is InvalidHost.
 *
 * The allow-list admits an address inside one of its CIDRs; a metadata address only when an
 * entry names it alone (/32, /128), so `169.254.0.0/16` admits link-local proxies but never the
 * metadata service.
 *
 * Caveats: this checks a host *as written*. A DNS name that resolves to a refused address passes
 * here; the Node prober resolves names and checks every resolved address before connecting (and
 * connects to the checked address), but the Workers prober cannot resolve names, so there it
 * remains a residual risk (Workers' own egress reaches neither a cloud metadata service nor a
 * private network anyway). The probe URL's host is resolved by the proxy, not by us, so only its
 * literal form can be checked.
 */

export type RefusalReason =
  | "MetadataAddress"
  | "LinkLocal"
  | "Unspecified"
  | "Loopback"
  | "PrivateAddress"
  | "InvalidHost"
  | "InvalidURL";

export type TargetVerdict = { allowed: true } | { allowed: false; reason: RefusalReason; message: string };

/** A decoded IP literal. IPv4 is held as 4 bytes, IPv6 as 16. */
export type IpAddress = { family: 4; bytes: Uint8Array } | { family: 6; bytes: Uint8Array };

const loopbackIpv4: IpAddress = { family: 4, bytes: Uint8Array.of(127, 0, 0, 1) };

const metadataHostNames = new Set([
  "metadata.google.internal",
  "metadata.goog",
  "instance-data.ec2.internal",
]);

/** An IP prefix: `10.0.0.0/8`, `::1/128`. */
export interface Cidr {
  family: 4 | 6;
  prefix: Uint8Array;
  bits: number;
}

interface Rule extends Cidr {
  reason: RefusalReason;
  label: string;
  /** `tenant`: refused only where a tenant wrote the host (see {@link TargetPolicy.trusted}). */
  scope: "always" | "tenant";
}

function rule(cidr: string, reason: RefusalReason, label: string, scope: Rule["scope"] = "always"): Rule {
  const parsed = parseCidr(cidr);
  if (!parsed) throw new Error(`bad built-in CIDR ${cidr}`);
  return { ...parsed, reason, label, scope };
}

// Most specific first: the first match names the reason.
const rules: readonly Rule[] = [
  rule("169.254.169.254/32", "MetadataAddress", "the cloud instance metadata service"),
  rule("169.254.170.2/32", "MetadataAddress", "the ECS task metadata endpoint"),
  rule("169.254.170.23/32", "MetadataAddress", "the EKS pod identity agent"),
  rule("100.100.100.200/32", "MetadataAddress", "the Alibaba Cloud metadata service"),
  rule("168.63.129.16/32", "MetadataAddress", "the Azure WireServer (metadata and agent endpoint)"),
  rule("169.254.0.0/16", "LinkLocal", "an IPv4 link-local address"),
  rule("0.0.0.0/8", "Unspecified", "an unspecified IPv4 address"),
  rule("fd00:ec2::254/128", "MetadataAddress", "the EC2 IPv6 metadata service"),
  rule("fd00:ec2::23/128", "MetadataAddress", "the EKS pod identity agent (IPv6)"),
  rule("fe80::/10", "LinkLocal", "an IPv6 link-local address"),
  rule("::/128", "Unspecified", "the unspecified IPv6 address"),
  rule("127.0.0.0/8", "Loopback", "a loopback address", "tenant"),
  rule("::1/128", "Loopback", "the IPv6 loopback address", "tenant"),
  rule("10.0.0.0/8", "PrivateAddress", "a private address (10.0.0.0/8)", "tenant"),
  rule("172.16.0.0/12", "PrivateAddress", "a private address (172.16.0.0/12)", "tenant"),
  rule("192.168.0.0/16", "PrivateAddress", "a private address (192.168.0.0/16)", "tenant"),
  rule("100.64.0.0/10", "PrivateAddress", "a shared (carrier-grade NAT) address (100.64.0.0/10)", "tenant"),
  rule("fc00::/7", "PrivateAddress", "a unique local IPv6 address (fc00::/7)", "tenant"),
];

/**
 * The operator's allow-list of probe destinations (`PROBE_ALLOWED_CIDRS`): addresses inside these
 * CIDRs are probed although a rule above refuses them. Empty by default, on every platform but the
 * Node host on its embedded devcluster (a laptop: loopback).
 */
export interface ProbeAllowList {
  readonly cidrs: readonly Cidr[];
  /** As the operator wrote them, for messages. */
  readonly text: readonly string[];
}

export const emptyProbeAllowList: ProbeAllowList = { cidrs: [], text: [] };

/**
 * Parses `PROBE_ALLOWED_CIDRS` entries ("127.0.0.0/8", "::1/128"; an address alone is /32 or
 * /128). Returns the entries it could not read.
 *
 * @example
 * parseProbeAllowList(["10.20.0.0/16", "::1"]) // { ok: true, allowList: { cidrs: [...], text: [...] } }
 */
export function parseProbeAllowList(
  entries: readonly string[],
): { ok: true; allowList: ProbeAllowList } | { ok: false; invalid: string[] } {
  const cidrs: Cidr[] = [];
  const invalid: string[] = [];
  for (const entry of entries) {
    const text = entry.trim();
    const ip = text.includes("/") ? undefined : parseIpLiteral(text);
    const cidr = ip ? { family: ip.family, prefix: ip.bytes, bits: ip.bytes.length * 8 } : parseCidr(text);
    if (cidr) cidrs.push(cidr);
    else invalid.push(entry);
  }
  return invalid.length > 0 ? { ok: false, invalid } : { ok: true, allowList: { cidrs, text: entries } };
}

/** How strictly a host is screened. */
export interface TargetPolicy {
  /** Addresses admitted despite the rules; none when unset. */
  allow?: ProbeAllowList;
  /**
   * The host came from kubefn's own provider (a Managed instance's address), not from a tenant:
   * loopback and the private ranges are where such instances live, and are allowed.
   */
  trusted?: boolean;
}

/**
 * Decides whether a probe may connect to `host` (a name or an IP literal in any common spelling,
 * with or without brackets, zone id or trailing dot), a tenant's unless `policy.trusted`.
 *
 * @example
 * checkProbeTarget("0xA9FEA9FE") // { allowed: false, reason: "MetadataAddress", ... }
 * checkProbeTarget("127.0.0.1")  // { allowed: false, reason: "Loopback", ... }
 * checkProbeTarget("127.0.0.1", { allow: parsed("127.0.0.0/8") }) // { allowed: true }
 */
export function checkProbeTarget(host: string, policy: TargetPolicy = {}): TargetVerdict {
  if (normaliseHost(host) === "") {
    return {
      allowed: false,
      reason: "InvalidHost",
      message: `probe target host ${JSON.stringify(host)} is empty`,
    };
  }
  const name = canonicalHost(host);
  if (name === undefined) {
    return {
      allowed: false,
      reason: "InvalidHost",
      message: `probe target host ${JSON.stringify(host)} is not a host name or an IP address`,
    };
  }
  const ip = parseIpLiteral(name);
  if (!ip) {
    if (metadataHostNames.has(name)) return refusal(host, "MetadataAddress", "a cloud metadata host name");
    // A loopback name is judged as the address it names (RFC 6761), so the allow-list applies.
    if (name === "localhost" || name.endsWith(".localhost")) return checkAddress(loopbackIpv4, host, policy);
    return { allowed: true };
  }
  return checkAddress(ip, host, policy);
}

/** Like {@link checkProbeTarget} for an already decoded address (e.g. one DNS returned). */
export function checkAddress(ip: IpAddress, shownAs: string, policy: TargetPolicy = {}): TargetVerdict {
  const effective = embeddedIpv4(ip) ?? ip;
  const r = rules.find((rule) => (rule.scope === "always" || !policy.trusted) && matches(effective, rule));
  if (!r) return { allowed: true };
  const admitted = (policy.allow?.cidrs ?? []).some(
    (c) =>
      (matches(effective, c) || matches(ip, c)) &&
      // A metadata address only by an entry naming it alone.
      (r.reason !== "MetadataAddress" || c.bits === c.prefix.length * 8),
  );
  return admitted ? { allowed: true } : refusal(shownAs, r.reason, r.label);
}

function refusal(host: string, reason: RefusalReason, label: string): TargetVerdict {
  const allowListed = reason === "Loopback" || reason === "PrivateAddress" || reason === "LinkLocal";
  return {
    allowed: false,
    reason,
    message: `probe target ${JSON.stringify(host)} is ${label}; refused to connect${
      allowListed ? " (an operator may admit it with PROBE_ALLOWED_CIDRS)" : ""
    }`,
  };
}

function matches(ip: IpAddress, r: Cidr): boolean {
  if (ip.family !== r.family) return false;
  for (let bit = 0; bit < r.bits; bit += 8) {
    const remaining = r.bits - bit;
    const mask = remaining >= 8 ? 0xff : (0xff << (8 - remaining)) & 0xff;
    const i = bit / 8;
    if (((ip.bytes[i] ?? 0) & mask) !== ((r.prefix[i] ?? 0) & mask)) return false;
  }
  return true;
}

/** The IPv4 address inside an IPv4-mapped (::ffff:a.b.c.d), -compatible (::a.b.c.d) or NAT64 form. */
function embeddedIpv4(ip: IpAddress): IpAddress | undefined {
  if (ip.family !== 6) return undefined;
  const b = ip.bytes;
  const zeros = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  const tail: IpAddress = { family: 4, bytes: b.slice(12, 16) };
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return tail;
  // IPv4-compatible (deprecated) — but not :: or ::1.
  if (zeros(0, 12) && !zeros(12, 15)) return tail;
  // NAT64 well-known prefix 64:ff9b::/96.
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12)) return tail;
  return undefined;
}

/**
 * The host as the WHATWG URL parser (Node's, workerd's, undici's) reads it: IDNA-mapped (full-width
 * and ideographic dots and digits become ASCII), IPv4 in any spelling made dotted decimal. The
 * address a platform connects to is the one checked, however the tenant spelled it. Undefined
 * when it is not a host alone (user info, a port, a path, a forbidden code point, an IPv4 number
 * out of range): such a string could be read as a different host by whatever connects.
 */
function canonicalHost(host: string): string | undefined {
  const h = normaliseHost(host);
  if (h.includes(":")) return parseIpv6(h) ? h : undefined;
  if (/[\s/\\@?#%:[\]<>^|]/.test(h)) return undefined;
  let parsed: string;
  try {
    parsed = new URL(`http://${h}/`).hostname;
  } catch {
    return undefined;
  }
  return parsed.endsWith(".") ? parsed.slice(0, -1) : parsed;
}

/** Lower-cases, strips brackets, an IPv6 zone id and one trailing dot. */
export function normaliseHost(host: string): string {
  let h = host.trim().toLowerCase();
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1);
  const zone = h.indexOf("%");
  if (zone >= 0 && h.includes(":")) h = h.slice(0, zone);
  if (h.endsWith(".")) h = h.slice(0, -1);
  return h;
}

/** Parses an IP literal in any spelling the platform resolvers accept; undefined for a name. */
export function parseIpLiteral(host: string): IpAddress | undefined {
  const h = normaliseHost(host);
  if (h.includes(":")) return parseIpv6(h);
  return parseIpv4(h);
}

/**
 * `inet_aton` semantics: 1–4 parts, each decimal, 0x-hex or 0-octal; the last part fills the
 * remaining bytes ("169.254.43518", "2852039166").
 */
function parseIpv4(h: string): IpAddress | undefined {
  const parts = h.split(".");
  if (parts.length < 1 || parts.length > 4) return undefined;
  const values: number[] = [];
  for (const part of parts) {
    const v = parseIpv4Part(part);
    if (v === undefined) return undefined;
    values.push(v);
  }
  const last = values.pop()!;
  for (const v of values) if (v > 0xff) return undefined;
  const lastBytes = 4 - values.length;
  if (last >= 2 ** (8 * lastBytes)) return undefined;
  const bytes = new Uint8Array(4);
  values.forEach((v, i) => {
    bytes[i] = v;
  });
  for (let i = 0; i < lastBytes; i++) {
    bytes[3 - i] = Math.floor(last / 2 ** (8 * i)) & 0xff;
  }
  return { family: 4, bytes };
}

function parseIpv4Part(part: string): number | undefined {
  let digits = part;
  let radix = 10;
  if (/^0x/i.test(digits)) {
    digits = digits.slice(2);
    radix = 16;
    if (digits === "") return 0;
  } else if (digits.length > 1 && digits.startsWith("0")) {
    digits = digits.slice(1);
    radix = 8;
  }
  const valid = radix === 16 ? /^[0-9a-f]+$/i : radix === 8 ? /^[0-7]+$/ : /^[0-9]+$/;
  if (!valid.test(digits)) return undefined;
  const v = Number.parseInt(digits, radix);
  return Number.isSafeInteger(v) && v <= 0xffffffff ? v : undefined;
}

function parseIpv6(h: string): IpAddress | undefined {
  let text = h;
  const words: number[] = [];
  // A trailing dotted IPv4 fills the last two words.
  let v4Tail: Uint8Array | undefined;
  const lastColon = text.lastIndexOf(":");
  const tail = text.slice(lastColon + 1);
  if (tail.includes(".")) {
    if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(tail)) return undefined;
    const v4 = tail.split(".").map(Number);
    if (v4.some((x) => x > 255)) return undefined;
    v4Tail = Uint8Array.from(v4);
    text = `${text.slice(0, lastColon + 1)}0:0`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  const parseWords = (s: string): number[] | undefined => {
    if (s === "") return [];
    const out: number[] = [];
    for (const w of s.split(":")) {
      if (!/^[0-9a-f]{1,4}$/.test(w)) return undefined;
      out.push(Number.parseInt(w, 16));
    }
    return out;
  };
  const head = parseWords(halves[0] ?? "");
  const rest = halves.length === 2 ? parseWords(halves[1] ?? "") : [];
  if (!head || !rest) return undefined;
  if (halves.length === 2) {
    if (head.length + rest.length > 7) return undefined;
    words.push(...head, ...new Array<number>(8 - head.length - rest.length).fill(0), ...rest);
  } else {
    if (head.length !== 8) return undefined;
    words.push(...head);
  }
  const bytes = new Uint8Array(16);
  words.forEach((w, i) => {
    bytes[2 * i] = w >> 8;
    bytes[2 * i + 1] = w & 0xff;
  });
  if (v4Tail) bytes.set(v4Tail, 12);
  return { family: 6, bytes };
}

function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf("/");
  if (slash < 0) return undefined;
  const ip = parseIpLiteral(text.slice(0, slash));
  const bits = Number(text.slice(slash + 1));
  if (!ip || !Number.isInteger(bits) || bits < 0 || bits > ip.bytes.length * 8) return undefined;
  return { family: ip.family, prefix: ip.bytes, bits };
}
