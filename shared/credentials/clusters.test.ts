import { describe, expect, it } from "vitest";
import * as z from "../zod/index.ts";
import { type ClusterDeclaration, clustersVariable, unusableCredentials } from "./clusters.ts";

const parse = (list: unknown) => z.safeParse(clustersVariable, JSON.stringify(list));
const east = { name: "east", server: "https://east.example:6443", credential: { kind: "token", token: "t" } };

describe("KUBEFN_CLUSTERS", () => {
  it("reads each credential kind, once, into its own shape", () => {
    const list = [
      east,
      { name: "west", credential: { kind: "kubeconfig", file: "/etc/kubefn/west.yaml", context: "w" } },
      { name: "home", credential: { kind: "in-cluster" } },
      { name: "gke-1", server: "https://34.1.2.3", credential: { kind: "google", key: "{}" } },
      {
        name: "eks-1",
        server: "https://x.eks.amazonaws.com",
        credential: { kind: "eks", clusterName: "prod", region: "eu-west-1" },
      },
      {
        name: "edge",
        server: "https://edge.example",
        credential: { kind: "oidc-issuer", audience: "kubefn-edge" },
      },
    ];
    const parsed = parse(list);
    expect(parsed.success).toBe(true);
    expect(parsed.data?.map((c) => c.credential.kind)).toEqual([
      "token",
      "kubeconfig",
      "in-cluster",
      "google",
      "eks",
      "oidc-issuer",
    ]);
  });

  it.each([
    ["a name that is no DNS label", [{ ...east, name: "East_1" }], /DNS label/],
    ["a name longer than 63", [{ ...east, name: "a".repeat(64) }], /DNS label/],
    ["two clusters of one name", [east, east], /unique/],
    ["an unknown credential kind", [{ ...east, credential: { kind: "password", password: "x" } }], /kind/],
    [
      "a field the kind has not",
      [{ ...east, credential: { kind: "token", token: "t", file: "/x" } }],
      /file/,
    ],
    [
      "a token kind with no server",
      [{ name: "east", credential: { kind: "token", token: "t" } }],
      /server is required/,
    ],
    ["an http server", [{ ...east, server: "http://east.example" }], /https/],
    [
      "an http server that only starts like loopback",
      [{ ...east, server: "http://127.0.0.1.example" }],
      /https/,
    ],
    ["a CA that is no PEM", [{ ...east, ca: "not a cert" }], /PEM/],
    ["a short audit token", [{ ...east, auditToken: "short" }], /16 characters/],
    [
      "two clusters sharing an audit token",
      [
        { ...east, auditToken: "a".repeat(16) },
        { ...east, name: "west", relaySecret: "a".repeat(16) },
      ],
      /its own/,
    ],
    ["not JSON", "east=https://east", /JSON list/],
  ])("refuses %s", (_what, list, message) => {
    const parsed = typeof list === "string" ? z.safeParse(clustersVariable, list) : parse(list);
    expect(parsed.success).toBe(false);
    expect(JSON.stringify(parsed.error?.issues)).toMatch(message);
  });

  it("takes plain http to a loopback address only (a development pass-through: no token crosses a network)", () => {
    for (const server of ["http://127.0.0.1:8001", "http://localhost:8001/", "http://[::1]:8001"]) {
      expect(parse([{ ...east, server }]).success).toBe(true);
    }
  });

  it("refuses more than 100 clusters: every one is a label value on every series", () => {
    const many = Array.from({ length: 101 }, (_, i) => ({ ...east, name: `c${i}` }));
    expect(parse(many).success).toBe(false);
    expect(parse(many.slice(0, 100)).success).toBe(true);
  });

  it("names each cluster whose credential a platform cannot use", () => {
    const clusters = parse([
      east,
      {
        name: "eks-1",
        server: "https://x.eks.amazonaws.com",
        credential: { kind: "eks", clusterName: "p", region: "eu-west-1" },
      },
    ]).data as ClusterDeclaration[];
    expect(unusableCredentials(clusters, ["token", "kubeconfig"])).toEqual([
      "eks-1: credential kind eks cannot be used on this platform (it uses token, kubeconfig)",
    ]);
    expect(unusableCredentials(clusters, ["token", "eks"])).toEqual([]);
    expect(unusableCredentials(clusters, [])).toHaveLength(2);
  });
});
