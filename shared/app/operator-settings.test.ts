import { describe, expect, it } from "vitest";
import { parseAwsEnv } from "../../functions/aws/config.ts";
import { parseWorkerEnv } from "../../functions/cloudflare/config.ts";
import { parseNodeHostEnv } from "../../functions/node/config.ts";
import { ownNamespace } from "./operator-settings.ts";

const key = JSON.stringify({
  type: "service_account",
  client_email: "kubefn@p.iam.gserviceaccount.com",
  private_key: "-----BEGIN PRIVATE KEY-----\nMIIsecretbytes\n-----END PRIVATE KEY-----\n",
  token_uri: "https://oauth2.googleapis.com/token",
});
const operatorEnv = {
  SITE_IMAGE_REGISTRY: "registry.example.com/unbounded",
  SITE_IMAGE_TAG: "v0.1.24",
  SITE_APISERVER_ENDPOINT: "https://10.0.0.1:6443",
  SUBPOOL_MAX_CPU: "4",
  SUBPOOL_GATEWAY: "gateways/public",
  GCE_PROJECT: "crawl-prod",
  GCE_ZONES: "europe-west1-b, europe-west1-c",
  GCE_CREDENTIALS: key,
  GCE_NETWORK: "crawl-proxies",
  PROBE_ALLOWED_CIDRS: "10.0.0.0/8",
};
/** Every platform's parser, with the platform's own required variables. */
const platforms: [string, (env: Record<string, string>) => { operators: unknown }][] = [
  ["Node host", (env) => parseNodeHostEnv(env).settings],
  [
    "Workers",
    (env) => parseWorkerEnv({ KUBE_SERVER: "https://kube.example.com", KUBE_TOKEN: "t0ken", ...env }),
  ],
  [
    "Lambda",
    (env) =>
      parseAwsEnv({
        AWS_REGION: "eu-west-1",
        QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/kubefn",
        KUBECONFIG: "/var/task/kubeconfig",
        ...env,
      }),
  ],
];

describe.each(platforms)("operator settings on %s", (_, parse) => {
  it("image registry, tag, API endpoint, SubPool configuration and GCE come from the same names", () => {
    expect(parse(operatorEnv).operators).toEqual({
      subpool: {
        config: {
          envelope: { cpu: "4", memory: "4Gi" },
          gateway: { namespace: "gateways", name: "public" },
          proxyGateway: { namespace: "subrelay-system", service: "mihomo" },
        },
      },
      site: {
        namespace: "kubefn-system",
        config: {
          imageRegistry: "registry.example.com/unbounded",
          imageTag: "v0.1.24",
          apiServerEndpoint: "https://10.0.0.1:6443",
        },
      },
      proxy: {
        gce: {
          project: "crawl-prod",
          zones: ["europe-west1-b", "europe-west1-c"],
          // Only the fields the token source uses are kept.
          serviceAccountKey: (({ type: _, ...rest }) => rest)(JSON.parse(key)),
          network: "crawl-proxies",
          networkTags: ["kubefn-proxy"],
        },
        instanceAllowList: {
          images: [
            "ghcr.io/kubefn/forward-proxy:*",
            "ghcr.io/kubefn/forward-proxy@*",
            "projects/debian-cloud/*",
          ],
          machineTypes: ["e2-micro", "e2-small", "e2-medium"],
          zones: ["europe-west1-b", "europe-west1-c"],
        },
        probeAllowList: { cidrs: [expect.objectContaining({ family: 4, bits: 8 })], text: ["10.0.0.0/8"] },
      },
    });
  });

  it("what a Managed Proxy may run: PROXY_ALLOWED_IMAGES and PROXY_ALLOWED_MACHINE_TYPES replace the defaults", () => {
    const set = parse({
      PROXY_ALLOWED_IMAGES: "registry.example/proxy:*, ghcr.io/kubefn/forward-proxy:1.2",
      PROXY_ALLOWED_MACHINE_TYPES: "*",
    }).operators as { proxy: unknown };
    expect(set.proxy).toEqual({
      instanceAllowList: {
        images: ["registry.example/proxy:*", "ghcr.io/kubefn/forward-proxy:1.2"],
        machineTypes: ["*"],
      },
      // None, but on the Node host's embedded devcluster (loopback; see settings.test.ts).
      probeAllowList: expect.objectContaining({ text: _ === "Node host" ? ["127.0.0.0/8", "::1/128"] : [] }),
    });
  });

  it("PROXY_POD_IMAGE: the pod provider's image when a Proxy names none, an image reference or refused", () => {
    const pinned = `ghcr.io/kubefn/forward-proxy:0.2.0@sha256:${"a".repeat(64)}`;
    const set = parse({ PROXY_POD_IMAGE: pinned }).operators as { proxy: { podImage?: string } };
    expect(set.proxy.podImage).toBe(pinned);
    expect((parse({}).operators as { proxy: { podImage?: string } }).proxy.podImage).toBeUndefined();
    expect(() => parse({ PROXY_POD_IMAGE: "forward proxy:latest" })).toThrow(
      /PROXY_POD_IMAGE must be an image reference/,
    );
  });

  it("the Site namespace follows the operator's own (its ServiceAccount's) unless set", () => {
    const selfVar = _ === "Node host" ? "KUBEFN_SELF_USERNAMES" : "SELF_USERNAMES";
    const own = parse({ [selfVar]: "system:serviceaccount:platform-ops:kubefn" }).operators as {
      site: { namespace: string };
    };
    expect(own.site.namespace).toBe("platform-ops");
    const set = parse({ SITE_NAMESPACE: "unbounded" }).operators as { site: { namespace: string } };
    expect(set.site.namespace).toBe("unbounded");
  });

  it("without GCE_* there is no gce provider; a partial GCE configuration is refused by name", () => {
    expect(parse({}).operators).toHaveProperty("proxy");
    expect((parse({}).operators as { proxy: object }).proxy).not.toHaveProperty("gce");
    expect(() => parse({ GCE_PROJECT: "crawl-prod" })).toThrow(/GCE_ZONES[\s\S]*GCE_CREDENTIALS/);
  });

  it("GCE_NETWORK is required with GCE_PROJECT: the project's default network is never chosen for the operator", () => {
    const { GCE_NETWORK: _, ...withoutNetwork } = operatorEnv;
    expect(() => parse(withoutNetwork)).toThrow(
      /GCE_NETWORK: required with GCE_PROJECT[\s\S]*write `default`/,
    );
    const written = parse({ ...operatorEnv, GCE_NETWORK: "default" }).operators as {
      proxy: { gce: { network: string } };
    };
    expect(written.proxy.gce.network).toBe("default");
  });

  it("the subnetwork and the network tags the firewall rules target come from GCE_SUBNETWORK and GCE_NETWORK_TAGS", () => {
    const got = parse({
      ...operatorEnv,
      GCE_NETWORK: "projects/net-host/global/networks/crawl",
      GCE_SUBNETWORK: "proxies",
      GCE_NETWORK_TAGS: "crawl-proxy, no-internal-egress",
    }).operators as { proxy: { gce: Record<string, unknown> } };
    expect(got.proxy.gce).toMatchObject({
      network: "projects/net-host/global/networks/crawl",
      subnetwork: "proxies",
      networkTags: ["crawl-proxy", "no-internal-egress"],
    });
    expect(() => parse({ ...operatorEnv, GCE_NETWORK: "Crawl Proxies" })).toThrow(/GCE_NETWORK must be/);
  });

  it("bad credentials are refused without echoing them", () => {
    let message = "";
    try {
      parse({ ...operatorEnv, GCE_CREDENTIALS: '{"client_email":"x","private_key":"MIIsecretbytes"}' });
    } catch (err) {
      message = String(err);
    }
    expect(message).toMatch(/GCE_CREDENTIALS: not a service-account key/);
    expect(message).not.toContain("MIIsecretbytes");
  });

  it("a bad SubPool setting stops only SubPools: the rest of the settings parse, and the SubPool operator's config says why", () => {
    const settings = parse({ SUBPOOL_MAX_CPU: "plenty", SUBPOOL_GATEWAY: "no-slash" }) as {
      operators: { subpool: { config: { invalid?: string } }; site: unknown };
    };
    expect(settings.operators.subpool.config.invalid).toMatch(/SUBPOOL_GATEWAY: must be namespace\/name/);
    expect(settings.operators.subpool.config.invalid).toMatch(/SUBPOOL_\*: operator configuration/);
    expect(settings.operators.site).toBeDefined();
  });

  it("SUBPOOL_RECHECK_SECONDS: the seed's 30 s look at active pools when set; a bad value stops only SubPools", () => {
    const on = parse({ SUBPOOL_RECHECK_SECONDS: "30" }) as {
      operators: { subpool: { recheckSeconds?: number } };
    };
    expect(on.operators.subpool.recheckSeconds).toBe(30);
    const off = parse({}) as { operators: { subpool: { recheckSeconds?: number } } };
    expect(off.operators.subpool.recheckSeconds).toBeUndefined();
    const bad = parse({ SUBPOOL_RECHECK_SECONDS: "1" }) as {
      operators: { subpool: { config: { invalid?: string } } };
    };
    expect(bad.operators.subpool.config.invalid).toMatch(
      /SUBPOOL_RECHECK_SECONDS: must be whole seconds from 5 to 3600/,
    );
  });
});

describe("ownNamespace", () => {
  it.each([
    [["system:serviceaccount:kubefn-system:kubefn"], "kubefn-system"],
    [["admin", "system:serviceaccount:ops:kubefn"], "ops"],
    [["admin"], "kubefn-system"],
  ])("%j → %s", (users, namespace) => {
    expect(ownNamespace(users)).toBe(namespace);
  });
});
