/**
 * The dashboard's side panels. The page (main.ts) mounts them on its own
 * elements and talks to them through a PanelHost (host.ts):
 *
 *   const side = mountSidePanel(el, host, { onRouteEnd: (which, id) => route.setEnd(which, id) });
 *   const alerts = mountAlerts(el, host);      // alerts.push(msg.events, msg.dropped) on ws "alerts"
 *   const route = mountRoute(el, host);
 *   const scenarios = mountScenarios(el, host);
 *   const jobs = mountJobs(el, host);          // host.showAllocations colours cards by job / tenant
 *   const heal = mountRemediations(el, host);  // heal.push(msg.event, msg.remediation) on ws "remediation"
 *   await Promise.all([alerts.reset(), scenarios.reset()]);   // and again when the cluster changes
 */
import "uplot/dist/uPlot.min.css";
import "./panels.css";

export * from "./host";
export { mountSidePanel, type SidePanel, type SidePanelOptions } from "./side";
export { mountAlerts, type AlertsPanel, type AlertsOptions } from "./alerts";
export { mountRoute, type RoutePanel, type RouteOptions } from "./route";
export { mountScenarios, type ScenariosPanel, type ScenariosOptions } from "./scenarios";
export { mountJobs, type JobsPanel, type JobsHost } from "./jobs";
export { mountRemediations, type RemediationsPanel, type RemediationPayload } from "./remediations";
export { mountFacility, type FacilityPanel } from "./facility";
