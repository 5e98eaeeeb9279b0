import { isRecord } from "../guards/index.ts";
import type { ObjectMeta, Resource } from "../kube/index.ts";
import * as z from "../zod/index.ts";
import { type CelRule, type JsonSchemaProps, structuralSchemaOf } from "./schema.ts";

/** One `additionalPrinterColumns` entry (what `kubectl get` shows). */
export interface PrinterColumn {
  name: string;
  type: "integer" | "number" | "string" | "boolean" | "date";
  /** A simple JSONPath into the object, e.g. `.status.phase`. */
  jsonPath: string;
  description?: string;
  format?: string;
  /** 0 shows in the standard view; higher only with `-o wide`. */
  priority?: number;
}

/**
 * What the runtime needs of a kind: its address and the zod schemas of spec and status, from which
 * the TypeScript types and the reconciler's parser derive.
 */
export interface KindSpec<
  Spec extends z.ZodMiniType = z.ZodMiniType,
  Status extends z.ZodMiniType = z.ZodMiniType,
> {
  group: string;
  version: string;
  kind: string;
  plural: string;
  scope: "Namespaced" | "Cluster";
  /** `spec` is required in the CRD unless this schema accepts `undefined` (`.optional()`/`.default()`). */
  spec: Spec;
  status: Status;
}

/**
 * The CRD category of every kind kubefn serves: `kubectl get kubefn` lists Proxies, SubPools and
 * Sites together.
 */
export const kubefnCategory = "kubefn";

/**
 * Everything a CRD needs beyond the kind: names, descriptions, CEL rules and printer columns, which
 * only `npm run gen:crds` reads. Each controller declares it in its crd.ts, which the runtime (and
 * so the Worker bundle) never imports; `spec` and `status` there are the kind's schemas with field
 * notes added by `documented` (meta.ts).
 */
export interface CrdSpec<
  Spec extends z.ZodMiniType = z.ZodMiniType,
  Status extends z.ZodMiniType = z.ZodMiniType,
> extends KindSpec<Spec, Status> {
  singular: string;
  shortNames?: readonly string[];
  categories?: readonly string[];
  description?: string;
  /** CEL rules on the whole object; the only place a rule can see `self.metadata.name`. */
  validations?: readonly CelRule[];
  printerColumns?: readonly PrinterColumn[];
}

/** An apiextensions.k8s.io/v1 CustomResourceDefinition with one served, stored version. */
export interface CustomResourceDefinition {
  apiVersion: "apiextensions.k8s.io/v1";
  kind: "CustomResourceDefinition";
  metadata: { name: string };
  spec: {
    group: string;
    names: {
      kind: string;
      listKind: string;
      plural: string;
      singular: string;
      shortNames?: string[];
      categories?: string[];
    };
    scope: "Namespaced" | "Cluster";
    versions: Array<{
      name: string;
      served: true;
      storage: true;
      schema: { openAPIV3Schema: JsonSchemaProps };
      subresources: { status: Record<string, never> };
      additionalPrinterColumns?: PrinterColumn[];
    }>;
  };
}

/**
 * Builds the CRD for a kind: structural schema from the zod spec/status, status subresource on,
 * printer columns as given.
 *
 * @example
 * const crd = crdFor(proxyCrd);
 * crd.metadata.name; // "proxies.crawl.kubefn.dev"
 *
 * Caveats: `metadata` is emitted as `{type: object}` only, as the API server requires; constrain
 * names through root-level {@link CrdSpec.validations} (`self.metadata.name`). When one of those
 * names `fieldPath: ".metadata.name"` (so `kubectl` says `metadata.name: Invalid value: …`, not
 * `<nil>: …`), `metadata.name` is declared as a string for the path to resolve.
 */
export function crdFor(spec: CrdSpec): CustomResourceDefinition {
  const root: JsonSchemaProps = {
    type: "object",
    ...(spec.description === undefined ? {} : { description: spec.description }),
    properties: {
      apiVersion: {
        type: "string",
        description: "APIVersion defines the versioned schema of this representation of an object.",
      },
      kind: {
        type: "string",
        description: "Kind is a string value representing the REST resource this object represents.",
      },
      metadata: spec.validations?.some((v) => v.fieldPath === ".metadata.name")
        ? { type: "object", properties: { name: { type: "string" } } }
        : { type: "object" },
      spec: structuralSchemaOf(spec.spec),
      status: structuralSchemaOf(spec.status),
    },
    ...(spec.spec.safeParse(undefined).success ? {} : { required: ["spec"] }),
    ...(spec.validations === undefined || spec.validations.length === 0
      ? {}
      : { "x-kubernetes-validations": [...spec.validations] }),
  };
  const names: CustomResourceDefinition["spec"]["names"] = {
    kind: spec.kind,
    listKind: `${spec.kind}List`,
    plural: spec.plural,
    singular: spec.singular,
  };
  if (spec.shortNames !== undefined && spec.shortNames.length > 0) names.shortNames = [...spec.shortNames];
  if (spec.categories !== undefined && spec.categories.length > 0) names.categories = [...spec.categories];
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${spec.plural}.${spec.group}` },
    spec: {
      group: spec.group,
      names,
      scope: spec.scope,
      versions: [
        {
          name: spec.version,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: root },
          subresources: { status: {} },
          ...(spec.printerColumns === undefined || spec.printerColumns.length === 0
            ? {}
            : { additionalPrinterColumns: spec.printerColumns.map((c) => ({ ...c })) }),
        },
      ],
    },
  };
}

/** The {@link Resource} (port address) of a CRD's kind. */
export function resourceFor(spec: KindSpec): Resource {
  return {
    group: spec.group,
    version: spec.version,
    resource: spec.plural,
    kind: spec.kind,
    namespaced: spec.scope === "Namespaced",
  };
}

const objectMetaSchema = z.custom<ObjectMeta>(isRecord, { message: "metadata must be an object" });

/**
 * The zod schema of a whole object of the kind: apiVersion and kind checked, metadata kept as is,
 * spec and status parsed (defaults applied, unknown fields stripped).
 *
 * Caveats: the parsed object is for reading. Write status back as a patch of the fields you
 * own; never PUT the parsed object, since stripping would drop fields a newer schema added.
 */
export function objectSchemaFor<Spec extends z.ZodMiniType, Status extends z.ZodMiniType>(
  spec: KindSpec<Spec, Status>,
) {
  return z.object({
    apiVersion: z.literal(`${spec.group}/${spec.version}`),
    kind: z.literal(spec.kind),
    metadata: objectMetaSchema,
    spec: spec.spec,
    status: z.optional(spec.status),
  });
}
