// GENERATED FILE, DO NOT EDIT. Regenerate with `node --import tsx tools/gen-models.ts` (make models).
// Each database is a namespace because the schemas share table names (SSL, Connection, Meter, ...).

export * as nb from "./nb.generated.ts";
export { nbModel } from "./nb.generated.ts";
export * as sb from "./sb.generated.ts";
export { sbModel } from "./sb.generated.ts";
export * as vswitch from "./vswitch.generated.ts";
export { vswitchModel } from "./vswitch.generated.ts";
