export { PassHistory, type PassRecord } from "./pass-history.ts";
export { cachedFleet, type FleetSource, type FleetView, readFleet } from "./read.ts";
export { type AdmissionView, escapeHtml, type FleetGroupView, renderFleetPage } from "./render.ts";
export { type FleetGroup, type FleetPageOptions, fleetGroup, fleetPage, groupedFleetPage } from "./routes.ts";
export { stateOf } from "./state.ts";
