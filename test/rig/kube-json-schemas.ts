// JSON schemas for kubeconform from the apiserver's own OpenAPI v2 document and from a CRD's openAPIV3Schema,
// so the chart's objects are checked against the Kubernetes release we run, offline (kubeconform's default
// schemas are on a website no machine here reaches). One file per kind, named as SCHEMA_FILE_TEMPLATE says.
// Strict: an object schema with properties gets additionalProperties false, so a misspelt field fails.

/** kubeconform -schema-location template (relative to the schema directory); Group is the full group ("v1" for core). */
export const SCHEMA_FILE_TEMPLATE = "{{ .ResourceKind }}_{{ .Group }}_{{ .ResourceAPIVersion }}.json";

type Json = Record<string, unknown>;

export interface Gvk {
  group: string;
  version: string;
  kind: string;
}

/** The file name kubeconform asks for, for an object of this group, version and kind. */
export function schemaFileName({ group, version, kind }: Gvk): string {
  // kubeconform splits apiVersion at "/": core "v1" gives Group "v1" and ResourceAPIVersion "v1".
  const g = group === "" ? version : group;
  return `${kind.toLowerCase()}_${g}_${version}.json`;
}

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** Names of the definitions `root` refers to, transitively ("#/definitions/NAME"). */
function reachable(root: unknown, definitions: Json): Set<string> {
  const seen = new Set<string>();
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const node = stack.pop();
    if (Array.isArray(node)) stack.push(...node);
    else if (isObject(node)) {
      for (const [k, v] of Object.entries(node)) {
        if (k === "$ref" && typeof v === "string" && v.startsWith("#/definitions/")) {
          const name = v.slice("#/definitions/".length);
          if (!seen.has(name) && name in definitions) {
            seen.add(name);
            stack.push(definitions[name]);
          }
        } else stack.push(v);
      }
    }
  }
  return seen;
}

/**
 * One schema node made strict and JSON-Schema-correct: int-or-string accepts both, Quantity accepts numbers
 * (YAML `cpu: 1`), an object with listed properties refuses others unless it preserves unknown fields.
 */
function tighten(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(tighten);
  if (!isObject(node)) return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node)) out[k] = k === "enum" || k === "example" ? v : tighten(v);
  if (out.format === "int-or-string" || out["x-kubernetes-int-or-string"] === true) {
    delete out.type;
    out.anyOf = [{ type: "string" }, { type: "integer" }];
  }
  const preserves = out["x-kubernetes-preserve-unknown-fields"] === true;
  if (isObject(out.properties) && out.additionalProperties === undefined && !preserves)
    out.additionalProperties = false;
  return out;
}

function quantityLike(name: string): boolean {
  return name.endsWith(".api.resource.Quantity");
}

/** Every kind of an OpenAPI v2 document, as kubeconform schema files (name to schema). */
export function schemasFromOpenApiV2(doc: unknown): Map<string, Json> {
  if (!isObject(doc) || !isObject(doc.definitions))
    throw new Error("not an OpenAPI v2 document: no definitions");
  const definitions = doc.definitions;
  const tight: Json = {};
  for (const [name, def] of Object.entries(definitions))
    tight[name] = quantityLike(name) ? { anyOf: [{ type: "string" }, { type: "number" }] } : tighten(def);
  const out = new Map<string, Json>();
  for (const [name, def] of Object.entries(definitions)) {
    if (!isObject(def)) continue;
    const gvks = def["x-kubernetes-group-version-kind"];
    if (!Array.isArray(gvks)) continue;
    const used = reachable(def, definitions);
    const own: Json = {};
    for (const n of [...used].sort()) own[n] = tight[n];
    for (const gvk of gvks as Gvk[]) {
      // List kinds and the like carry GVKs too; only kinds with apiVersion and kind fields are objects we render.
      const props = isObject(def.properties) ? def.properties : {};
      if (!("kind" in props) || !("apiVersion" in props)) continue;
      out.set(schemaFileName(gvk), {
        $schema: "http://json-schema.org/draft-07/schema#",
        description: `${gvk.group || "core"}/${gvk.version} ${gvk.kind} from ${name}`,
        ...(tight[name] as Json),
        definitions: own,
      });
    }
  }
  return out;
}

/** The served versions of a CustomResourceDefinition (parsed YAML) as kubeconform schema files. */
export function schemasFromCrd(crd: unknown): Map<string, Json> {
  const out = new Map<string, Json>();
  if (!isObject(crd) || crd.kind !== "CustomResourceDefinition" || !isObject(crd.spec))
    throw new Error("not a CustomResourceDefinition");
  const { group, names, versions } = crd.spec as { group: string; names: { kind: string }; versions: Json[] };
  for (const v of versions) {
    const schema = isObject(v.schema) ? v.schema.openAPIV3Schema : undefined;
    if (!isObject(schema)) continue;
    const body = tighten(schema) as Json;
    // The apiserver adds apiVersion, kind and metadata to every custom resource; the CRD need not list them.
    const props = { ...(isObject(body.properties) ? body.properties : {}) };
    props.apiVersion ??= { type: "string" };
    props.kind ??= { type: "string" };
    props.metadata ??= { type: "object" };
    out.set(schemaFileName({ group, version: String(v.name), kind: names.kind }), {
      $schema: "http://json-schema.org/draft-07/schema#",
      description: `${group}/${String(v.name)} ${names.kind} from its CustomResourceDefinition`,
      ...body,
      properties: props,
    });
  }
  return out;
}
