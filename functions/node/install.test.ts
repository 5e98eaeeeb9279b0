import { describe, expect, it } from "vitest";
import type { Kube } from "../../shared/kube/index.ts";
import { parseNodeHostEnv } from "./config.ts";
import { allowForKubefn, allowListEntriesFor } from "./install.ts";

const entries = (env: Record<string, string>) =>
  allowListEntriesFor(parseNodeHostEnv(env).settings.operators).map((e) => `${e.list} ${e.key}=${e.value}`);

describe("the allow-lists a host that installs kubefn writes from its settings", () => {
  it.each([
    [
      "the defaults: kubefn's forward-proxy image, the default registry's components, no hostnames",
      {},
      [
        "kubefn-proxy-images host-0=ghcr.io/kubefn/forward-proxy:*",
        "kubefn-proxy-images host-1=ghcr.io/kubefn/forward-proxy@*",
        "kubefn-proxy-images host-2=projects/debian-cloud/*",
        "kubefn-subpool-limits cpu=2",
        "kubefn-subpool-limits memory=4Gi",
        "kubefn-site-images host-machina=ghcr.io/unbounded-cloud/machina:latest",
        "kubefn-site-images host-metalman=ghcr.io/unbounded-cloud/metalman:latest",
      ],
    ],
    [
      "PROXY_ALLOWED_IMAGES, SITE_IMAGE_*, SUBPOOL_HOSTNAME_SUFFIX and SUBPOOL_MAX_CPU",
      {
        PROXY_ALLOWED_IMAGES: "registry.example/proxy:*",
        SITE_IMAGE_REGISTRY: "registry.example/unbounded",
        SITE_IMAGE_TAG: "v1.2",
        SUBPOOL_HOSTNAME_SUFFIX: "pools.example.test",
        SUBPOOL_MAX_CPU: "8",
      },
      [
        "kubefn-proxy-images host-0=registry.example/proxy:*",
        "kubefn-subpool-hostnames host=*.pools.example.test",
        "kubefn-subpool-limits cpu=8",
        "kubefn-subpool-limits memory=4Gi",
        "kubefn-site-images host-machina=registry.example/unbounded/machina:v1.2",
        "kubefn-site-images host-metalman=registry.example/unbounded/metalman:v1.2",
      ],
    ],
    [
      "PROXY_POD_IMAGE: the image the pod provider runs is admitted too",
      {
        PROXY_ALLOWED_IMAGES: "registry.example/proxy:*",
        PROXY_POD_IMAGE: "mirror.example/forward-proxy:1.0",
      },
      [
        "kubefn-proxy-images host-0=registry.example/proxy:*",
        "kubefn-proxy-images pod-image=mirror.example/forward-proxy:1.0",
        "kubefn-subpool-limits cpu=2",
        "kubefn-subpool-limits memory=4Gi",
        "kubefn-site-images host-machina=ghcr.io/unbounded-cloud/machina:latest",
        "kubefn-site-images host-metalman=ghcr.io/unbounded-cloud/metalman:latest",
      ],
    ],
  ])("%s", (_, env, expected) => {
    expect(entries(env)).toEqual(expected);
  });

  it("adds to no ConfigMap an operator does not declare as its allow-list", async () => {
    const writes: unknown[] = [];
    const kube = new Proxy(
      {},
      {
        get:
          () =>
          (...args: unknown[]) =>
            writes.push(args),
      },
    ) as Kube;
    await expect(allowForKubefn(kube, "kubefn-status-writers", "k", "v")).rejects.toThrow(
      /no operator's allow-list/,
    );
    expect(writes).toEqual([]);
  });
});
