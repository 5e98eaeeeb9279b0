import { describe, expect, it } from "vitest";
import { screenProbeTarget } from "./probe.ts";
import {
  checkAddress,
  checkProbeTarget,
  type ProbeAllowList,
  parseIpLiteral,
  parseProbeAllowList,
  type RefusalReason,
} from "./target.ts";

function allowList(...entries: string[]): ProbeAllowList {
  const parsed = parseProbeAllowList(entries);
  if (!parsed.ok) throw new Error(`bad test allow-list ${entries.join(",")}`);
  return parsed.allowList;
}

describe("checkProbeTarget refuses", () => {
  it.each([
    // The metadata service in every spelling.
    ["169.254.169.254", "MetadataAddress"],
    ["169.254.169.254.", "MetadataAddress"],
    ["2852039166", "MetadataAddress"],
    ["0xA9FEA9FE", "MetadataAddress"],
    ["0xa9fea9fe", "MetadataAddress"],
    ["0251.0376.0251.0376", "MetadataAddress"],
    ["0xA9.0xFE.0xA9.0xFE", "MetadataAddress"],
    ["169.254.43518", "MetadataAddress"],
    ["169.16689662", "MetadataAddress"],
    ["0251.254.169.254", "MetadataAddress"],
    ["0x00000000A9FEA9FE", "MetadataAddress"],
    ["::ffff:169.254.169.254", "MetadataAddress"],
    ["[::ffff:169.254.169.254]", "MetadataAddress"],
    ["::ffff:a9fe:a9fe", "MetadataAddress"],
    ["0:0:0:0:0:ffff:a9fe:a9fe", "MetadataAddress"],
    ["::169.254.169.254", "MetadataAddress"],
    ["64:ff9b::169.254.169.254", "MetadataAddress"],
    ["64:ff9b::a9fe:a9fe", "MetadataAddress"],
    ["169.254.170.2", "MetadataAddress"],
    ["169.254.170.23", "MetadataAddress"],
    ["fd00:ec2::254", "MetadataAddress"],
    ["[FD00:EC2::254]", "MetadataAddress"],
    ["fd00:ec2:0:0:0:0:0:254", "MetadataAddress"],
    ["fd00:ec2::23", "MetadataAddress"],
    ["100.100.100.200", "MetadataAddress"],
    ["168.63.129.16", "MetadataAddress"],
    ["::ffff:168.63.129.16", "MetadataAddress"],
    ["1684301000", "MetadataAddress"],
    ["::ffff:100.100.100.200", "MetadataAddress"],
    ["metadata.google.internal", "MetadataAddress"],
    ["METADATA.GOOGLE.INTERNAL.", "MetadataAddress"],
    ["metadata.goog", "MetadataAddress"],
    ["instance-data.ec2.internal", "MetadataAddress"],
    // Link-local.
    ["169.254.0.1", "LinkLocal"],
    ["169.254.255.255", "LinkLocal"],
    ["0xA9FE0001", "LinkLocal"],
    ["fe80::1", "LinkLocal"],
    ["fe80::1%eth0", "LinkLocal"],
    ["[fe80::1%25eth0]", "LinkLocal"],
    ["febf:ffff::1", "LinkLocal"],
    ["::ffff:169.254.1.1", "LinkLocal"],
    // Unspecified.
    ["0.0.0.0", "Unspecified"],
    ["0", "Unspecified"],
    ["0x0", "Unspecified"],
    ["00", "Unspecified"],
    ["0.1.2.3", "Unspecified"],
    ["::", "Unspecified"],
    ["[::]", "Unspecified"],
    ["0:0:0:0:0:0:0:0", "Unspecified"],
    ["::ffff:0.0.0.0", "Unspecified"],
    // Spellings a URL parser or a resolver maps onto the metadata address (IDNA: full-width and
    // ideographic dots, circled and full-width digits and letters).
    ["169\u3002254\u3002169\u3002254", "MetadataAddress"],
    ["169\uff0e254\uff0e169\uff0e254", "MetadataAddress"],
    ["\u2460\u2465\u2468.\u2461\u2464\u2463.\u2460\u2465\u2468.\u2461\u2464\u2463", "MetadataAddress"],
    ["\uff11\uff16\uff19.254.169.254", "MetadataAddress"],
    ["\uff4d\uff45\uff54\uff41\uff44\uff41\uff54\uff41.google.internal", "MetadataAddress"],
    ["metadata.google.internal\u3002", "MetadataAddress"],
    // Not a host at all: user info, ports, paths and other URL syntax, which a platform's socket
    // or URL parser might read as a different host than the one checked.
    ["proxy.example@169.254.169.254", "InvalidHost"],
    ["169.254.169.254:80", "InvalidHost"],
    ["example.com:3128", "InvalidHost"],
    ["example.com/169.254.169.254", "InvalidHost"],
    ["example.com\\x", "InvalidHost"],
    ["example.com#x", "InvalidHost"],
    ["example .com", "InvalidHost"],
    ["example.com%00", "InvalidHost"],
    ["256.1.1.1", "InvalidHost"],
    // Nothing at all.
    ["", "InvalidHost"],
    ["  ", "InvalidHost"],
  ] as Array<[string, RefusalReason]>)("%s → %s", (host, reason) => {
    const verdict = checkProbeTarget(host);
    expect(verdict).toMatchObject({ allowed: false, reason });
    if (!verdict.allowed) expect(verdict.message).toContain(JSON.stringify(host));
  });
});

describe("a tenant's host on the internal network is refused unless PROBE_ALLOWED_CIDRS admits it", () => {
  it.each([
    ["127.0.0.1", "Loopback"],
    ["127.0.0.53", "Loopback"],
    ["2130706433", "Loopback"],
    ["0x7f.1", "Loopback"],
    ["localhost", "Loopback"],
    ["LOCALHOST.", "Loopback"],
    ["api.localhost", "Loopback"],
    ["::1", "Loopback"],
    ["[::1]", "Loopback"],
    ["::ffff:127.0.0.1", "Loopback"],
    ["64:ff9b::7f00:1", "Loopback"],
    ["10.0.0.1", "PrivateAddress"],
    ["10.255.255.255", "PrivateAddress"],
    ["167772161", "PrivateAddress"],
    ["192.168.1.10", "PrivateAddress"],
    ["172.16.0.1", "PrivateAddress"],
    ["172.31.255.254", "PrivateAddress"],
    ["100.64.0.1", "PrivateAddress"],
    ["100.100.100.201", "PrivateAddress"],
    ["fc00::1", "PrivateAddress"],
    ["fd12:3456::1", "PrivateAddress"],
    ["fd00:ec2::253", "PrivateAddress"],
    ["::ffff:10.1.2.3", "PrivateAddress"],
    ["１０.0.0.1", "PrivateAddress"],
  ] as Array<[string, RefusalReason]>)("%s → %s, allowed where kubefn's provider gave it", (host, reason) => {
    const verdict = checkProbeTarget(host);
    expect(verdict).toMatchObject({ allowed: false, reason });
    if (!verdict.allowed) expect(verdict.message).toContain("PROBE_ALLOWED_CIDRS");
    expect(checkProbeTarget(host, { trusted: true })).toEqual({ allowed: true });
  });

  it.each([
    ["127.0.0.1", "127.0.0.0/8", true],
    ["::1", "::1/128", true],
    ["::1", "::1", true],
    ["10.20.3.4", "10.20.0.0/16", true],
    ["10.21.3.4", "10.20.0.0/16", false],
    ["192.168.1.10", "127.0.0.0/8,10.0.0.0/8", false],
    ["::ffff:10.20.3.4", "10.20.0.0/16", true],
    ["169.254.1.1", "169.254.0.0/16", true],
    // A range never admits a metadata address; naming it alone does.
    ["169.254.169.254", "169.254.0.0/16", false],
    ["169.254.169.254", "0.0.0.0/0", false],
    ["168.63.129.16", "168.63.0.0/16", false],
    ["168.63.129.16", "168.63.129.16/32", true],
    ["fd00:ec2::254", "fc00::/7", false],
    // A loopback name is the address it names.
    ["localhost", "127.0.0.0/8", true],
    ["api.localhost", "10.0.0.0/8", false],
    ["metadata.google.internal", "0.0.0.0/0", false],
  ])("%s with PROBE_ALLOWED_CIDRS=%s → allowed %s", (host, cidrs, allowed) => {
    expect(checkProbeTarget(host, { allow: allowList(...cidrs.split(",")) }).allowed).toBe(allowed);
  });

  it("a resolved address is screened alike", () => {
    const ip = parseIpLiteral("10.0.0.7")!;
    expect(checkAddress(ip, "proxy.example (10.0.0.7)")).toMatchObject({ reason: "PrivateAddress" });
    expect(checkAddress(ip, "x", { allow: allowList("10.0.0.0/24") })).toEqual({ allowed: true });
    expect(checkAddress(ip, "x", { trusted: true })).toEqual({ allowed: true });
  });

  it("PROBE_ALLOWED_CIDRS entries that are not CIDRs are named", () => {
    expect(parseProbeAllowList(["10.0.0.0/8", "10.0.0.0/33", "example.com/8", "fc00::/7"])).toEqual({
      ok: false,
      invalid: ["10.0.0.0/33", "example.com/8"],
    });
  });
});

describe("checkProbeTarget allows", () => {
  it.each([
    "169.253.255.255",
    "169.255.0.1",
    "fec0::1",
    "2001:db8::1",
    "proxy.default.svc.cluster.local",
    "metadata.google.internal.example.com",
    "example.com",
    "1.1.1.1",
    "b\u00fccher.example", // an IDN: checked as xn--bcher-kva.example
    "xn--bcher-kva.example",
    "under_score.example",
  ])("%s", (host) => {
    expect(checkProbeTarget(host)).toEqual({ allowed: true });
  });
});

describe("no way around it", () => {
  it("a refusal names no setting: no platform had the health probe allowList its message pointed to", () => {
    const verdict = checkProbeTarget("169.254.169.254");
    expect(verdict).toMatchObject({ allowed: false, reason: "MetadataAddress" });
    expect(JSON.stringify(verdict)).not.toMatch(/allowList/);
  });
});

describe("parseIpLiteral", () => {
  it.each([
    ["1.2.3.4", [1, 2, 3, 4]],
    ["1.2.772", [1, 2, 3, 4]],
    ["1.131844", [1, 2, 3, 4]],
    ["16909060", [1, 2, 3, 4]],
    ["0x1.0x2.0x3.0x4", [1, 2, 3, 4]],
    ["01.02.03.04", [1, 2, 3, 4]],
  ])("%s", (text, bytes) => {
    expect(parseIpLiteral(text)).toEqual({ family: 4, bytes: Uint8Array.from(bytes) });
  });

  it.each([
    "1.2.3.4.5",
    "1.2.3.256",
    "08.1.1.1",
    "4294967296",
    "1..2",
    "a.b.c.d",
    "1:2:3",
    "1::2::3",
    "12345::",
  ])("%s is not an address", (text) => {
    expect(parseIpLiteral(text)).toBeUndefined();
  });
});

describe("screenProbeTarget", () => {
  const proxy = { host: "10.0.0.5", port: 3128, scheme: "http" as const };
  // A Managed instance's address: kubefn's provider gave it.
  const trusted = { trusted: true };
  it.each([
    ["http://127.0.0.1:8080/", false, "Loopback"],
    ["http://10.96.0.1/", false, "PrivateAddress"],
    ["https://[fd12::1]/", false, "PrivateAddress"],
    ["http://localhost/", false, "Loopback"],
    ["http://example.com/", true, undefined],
    ["https://example.com/", true, undefined],
    ["http://169.254.169.254/latest/meta-data/", false, "MetadataAddress"],
    ["http://0xA9FEA9FE/", false, "MetadataAddress"],
    ["http://[fd00:ec2::254]/", false, "MetadataAddress"],
    ["http://metadata.google.internal/computeMetadata/v1/", false, "MetadataAddress"],
    ["ftp://example.com/", false, "InvalidURL"],
    ["not a url", false, "InvalidURL"],
  ])("probe URL %s → %s", (url, allowed, reason) => {
    const verdict = screenProbeTarget({ proxy, url }, trusted);
    expect(verdict.allowed).toBe(allowed);
    if (!verdict.allowed) expect(verdict.reason).toBe(reason);
  });

  it("a tenant's proxy host on the internal network is refused; the allow-list admits it and its probe URL", () => {
    expect(screenProbeTarget({ proxy, url: "http://example.com/" })).toMatchObject({
      allowed: false,
      reason: "PrivateAddress",
    });
    const allow = allowList("10.0.0.0/24", "127.0.0.0/8");
    expect(screenProbeTarget({ proxy, url: "http://127.0.0.1:8080/" }, { allow })).toEqual({ allowed: true });
    expect(screenProbeTarget({ proxy, url: "http://10.0.1.1/" }, { allow })).toMatchObject({
      allowed: false,
      reason: "PrivateAddress",
    });
  });

  it("checks the proxy host first", () => {
    expect(
      screenProbeTarget({ proxy: { ...proxy, host: "169.254.169.254" }, url: "http://example.com/" }),
    ).toMatchObject({ allowed: false, reason: "MetadataAddress" });
  });
});
