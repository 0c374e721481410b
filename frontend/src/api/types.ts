/**
 * The REST API's answers as TypeScript types, generated from the server's
 * OpenAPI schema — the one contract between the serializers and the page.
 *
 * scripts/lib.sh writes frontend/openapi.json with `manage.py spectacular`
 * (from the code: no server needed) and `npm run schema` (part of the build)
 * turns it into schema.d.ts; neither file is committed. A field renamed or
 * retyped on the server therefore fails the type check, not the page. This
 * module only names the schemas the dashboard reads.
 */
import type { components } from "./schema";

type Schemas = components["schemas"];

// Inventory (twin/api)
export type Cluster = Schemas["Cluster"];
export type ClusterSummary = Schemas["ClusterSummary"];
export type AcceleratorType = Schemas["AcceleratorType"];
export type SuperNode = Schemas["SuperNode"];
export type Rack = Schemas["Rack"];
export type Server = Schemas["Server"];
export type Card = Schemas["Card"];
export type NetworkDevice = Schemas["NetworkDevice"];
export type Link = Schemas["Link"];
export type PaginatedClusterList = Schemas["PaginatedClusterList"];
export type PaginatedRackList = Schemas["PaginatedRackList"];
export type PaginatedLinkList = Schemas["PaginatedLinkList"];

// The 3D views' geometry (twin/api/geometry.py) and routes
export type Floor = Schemas["Floor"];
export type SupernodeGeometry = Schemas["SupernodeGeometry"];
export type RackGeometry = Schemas["RackGeometry"];
export type Route = Schemas["Route"];

// Telemetry (twin/telemetry)
export type Metric = Schemas["Metric"];
export type Alert = Schemas["Alert"];
export type PaginatedAlertList = Schemas["PaginatedAlertList"];
export type AlertGroup = Schemas["AlertGroup"];
export type PaginatedAlertGroupList = Schemas["PaginatedAlertGroupList"];

// Jobs on the twin (twin/jobs)
export type Job = Schemas["Job"];
export type PaginatedJobList = Schemas["PaginatedJobList"];
export type Placement = Schemas["Placement"];
export type ClusterAllocations = Schemas["ClusterAllocations"];

// Scenarios (twin/scenarios)
export type ScenarioKind = Schemas["ScenarioKind"];
export type KindField = Schemas["KindField"];
export type KindChart = Schemas["KindChart"];
export type ScenarioRun = Schemas["ScenarioRun"];
export type ScenarioRunList = Schemas["ScenarioRunList"];
export type ScenarioStatus = Schemas["JobStatusEnum"];
export type PaginatedScenarioRunList = Schemas["PaginatedScenarioRunListList"];
