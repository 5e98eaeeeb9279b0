import { describe, expect, it } from "vitest";
import { screenProbeTarget } from "./probe.ts";
import { checkProbeTarget, parseIpLiteral, type RefusalReason } from "./target.ts";

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

describe("checkProbeTarget allows", () => {
  it.each([
    "127.0.0.1",
    "127.0.0.53",
    "2130706433",
    "localhost",
    "::1",
    "[::1]",
    "::ffff:127.0.0.1",
    "10.0.0.1",
    "192.168.1.10",
    "172.16.0.1",
    "100.64.0.1",
    "100.100.100.201",
    "169.253.255.255",
    "169.255.0.1",
    "fec0::1",
    "fd00:ec2::253",
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
  it.each([
    ["http://example.com/", true, undefined],
    ["https://example.com/", true, undefined],
    ["http://169.254.169.254/latest/meta-data/", false, "MetadataAddress"],
    ["http://0xA9FEA9FE/", false, "MetadataAddress"],
    ["http://[fd00:ec2::254]/", false, "MetadataAddress"],
    ["http://metadata.google.internal/computeMetadata/v1/", false, "MetadataAddress"],
    ["ftp://example.com/", false, "InvalidURL"],
    ["not a url", false, "InvalidURL"],
  ])("probe URL %s → %s", (url, allowed, reason) => {
    const verdict = screenProbeTarget({ proxy, url });
    expect(verdict.allowed).toBe(allowed);
    if (!verdict.allowed) expect(verdict.reason).toBe(reason);
  });

  it("checks the proxy host first", () => {
    expect(
      screenProbeTarget({ proxy: { ...proxy, host: "169.254.169.254" }, url: "http://example.com/" }),
    ).toMatchObject({ allowed: false, reason: "MetadataAddress" });
  });
});
