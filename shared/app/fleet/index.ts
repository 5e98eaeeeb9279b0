export { PassHistory, type PassRecord } from "./pass-history.ts";
export { cachedFleet, type FleetSource, type FleetView, readFleet } from "./read.ts";
export { type AdmissionView, escapeHtml, renderFleetPage } from "./render.ts";
export { type FleetPageOptions, fleetPage } from "./routes.ts";
export { stateOf } from "./state.ts";
