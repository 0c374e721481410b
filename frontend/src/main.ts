/**
 * Dashboard entry: wires the page Django rendered (twin/web/templates/web/dashboard.html)
 * — cluster picker, summary strip, 3D view, side panels, status bar — to the API
 * and the live websocket.
 *
 * The chosen cluster, view and metric are kept in the URL (?cluster=&view=&id=&metric=)
 * so a link or a reload shows the same thing.
 */
import "./style.css";

import { Api, ApiError, type Cluster } from "./api";
import { h, renderSummary } from "./dashboard";
import type { ViewKind } from "./frames";
import { bindHook, installHook } from "./hook";
import { LiveClient, liveUrl } from "./live";
import {
  ROUTE_END_EVENT,
  mountAlerts,
  mountJobs,
  mountRemediations,
  mountFacility,
  mountRoute,
  mountScenarios,
  mountSidePanel,
  type AlertEvent,
  type RemediationPayload,
  type RouteEndDetail,
} from "./panels";
import type { Marker } from "./panels/contextmenu";
import { mountForkNow } from "./panels/forknow";
import { Controller } from "./scene/controller";
import { StatusBar } from "./statusbar";

const hook = installHook();

// Requests in flight, so leaving the page can wait for them (see the logout form).
let inflight = 0;
const pageFetch = window.fetch.bind(window);
window.fetch = (...args: Parameters<typeof fetch>): Promise<Response> => {
  inflight += 1;
  return pageFetch(...args).then(
    (response) => {
      // Done once the body has arrived too (a clone: the caller reads its own).
      void response
        .clone()
        .arrayBuffer()
        .catch(() => undefined)
        .finally(() => {
          inflight -= 1;
        });
      return response;
    },
    (error: unknown) => {
      inflight -= 1;
      throw error;
    },
  );
};

/** Resolve when no request is in flight, or after `maxMs`. */
function settled(maxMs: number): Promise<void> {
  const until = performance.now() + maxMs;
  return new Promise((resolve) => {
    const check = (): void => {
      if (inflight === 0 || performance.now() > until) resolve();
      else window.setTimeout(check, 25);
    };
    check();
  });
}
const REPORTING_POLL_MS = 5000;

interface UrlState {
  cluster: number | null;
  view: ViewKind;
  id: number | null;
  metric: string | null;
}

function readUrl(): UrlState {
  const q = new URLSearchParams(window.location.search);
  const int = (name: string): number | null => {
    const v = Number.parseInt(q.get(name) ?? "", 10);
    return Number.isFinite(v) ? v : null;
  };
  const view = q.get("view");
  return {
    cluster: int("cluster"),
    view: view === "supernode" || view === "rack" ? view : "cluster",
    id: int("id"),
    metric: q.get("metric"),
  };
}

function writeUrl(cluster: number, view: { kind: ViewKind; id: number | null; metric: string }): void {
  const url = new URL(window.location.href);
  url.searchParams.set("cluster", String(cluster));
  if (view.kind === "cluster") {
    url.searchParams.delete("view");
    url.searchParams.delete("id");
  } else {
    url.searchParams.set("view", view.kind);
    url.searchParams.set("id", String(view.id));
  }
  if (view.metric && view.metric !== "power_w") url.searchParams.set("metric", view.metric);
  else url.searchParams.delete("metric");
  if (url.href !== window.location.href) window.history.replaceState(null, "", url);
}

function explain(error: unknown): string {
  if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
    return "The API refused the request: log in again (your session may have expired).";
  }
  return error instanceof Error ? error.message : String(error);
}

function need<T extends Element>(selector: string): T {
  const el = document.querySelector<T>(selector);
  if (!el) throw new Error(`dashboard markup missing: ${selector}`);
  return el;
}

async function boot(): Promise<void> {
  performance.mark("twin:boot");
  const root = need<HTMLElement>("#app");
  const picker = need<HTMLSelectElement>("#cluster-picker");
  const api = new Api(root.dataset.apiRoot ?? "/api/");
  // Ask for the clusters (and the floor the URL names) before building the
  // scene, so the network and the WebGL start-up overlap.
  const wanted = readUrl();
  const clustersRequest = api.clusters();
  clustersRequest.catch(() => undefined);
  const status = new StatusBar(need<HTMLElement>("[data-testid=status-bar]"));
  status.start();
  const title = need<HTMLElement>("[data-testid=cluster-name]");
  const stats = need<HTMLElement>("[data-role=summary-stats]");

  if (wanted.cluster !== null) Controller.prefetchFloor(api, wanted.cluster);
  const controller = new Controller(
    api,
    {
      scene: need("[data-testid=scene]"),
      legend: need("[data-testid=legend]"),
      tooltip: need("[data-role=tooltip]"),
      message: need("[data-role=scene-message]"),
      crumbs: need("[data-role=crumbs]"),
      viewSelect: need("[data-testid=view-select]"),
      metricSelect: need("[data-testid=metric-select]"),
      drill: need("[data-testid=drill]"),
      home: need("[data-testid=camera-home]"),
    },
    hook,
    status,
  );
  bindHook({
    keys: () => controller.keys(),
    colourOf: (key) => controller.colourOf(key),
    valueOf: (key) => controller.valueOf(key),
    screenOf: (key) => controller.screenOf(key),
    pickAt: (x, y) => controller.pickObjectAt(x, y),
    markers: () => controller.markers(),
    markerScreenOf: (marker) => controller.markerScreenOf(marker as Marker),
    rackDraw: () => controller.rackDraw(),
    open: (kind, id) => controller.open(kind, id),
    select: (kind, id) =>
      controller.select({ kind: kind as "card" | "rack" | "link" | "supernode", id }, { fly: true }),
    highlighted: () => controller.highlighted(),
  });

  const route = mountRoute(need("#route-panel"), controller);
  const side = mountSidePanel(need("#side-panel"), controller, { onRouteEnd: (which, id) => route.setEnd(which, id) });
  const alerts = mountAlerts(need("#alerts-panel"), controller);
  const scenarios = mountScenarios(need("#scenarios-panel"), controller);
  const jobs = mountJobs(need("#jobs-panel"), controller);
  const remediations = mountRemediations(need("#remediations-panel"), controller);
  const facility = mountFacility(need("#facility-panel"), controller);
  controller.panels = { side, alerts, route, scenarios, jobs, remediations };
  mountForkNow(need("[data-testid=fork-now]"), need("[data-testid=fork-status]"), {
    api,
    clusterId: () => controller.clusterId(),
    open: (runId) => scenarios.open(runId),
  });
  document.addEventListener(ROUTE_END_EVENT, (event) => {
    const detail = (event as CustomEvent<RouteEndDetail>).detail;
    route.setEnd(detail.which, detail.cardId);
  });
  need<HTMLElement>("#side-panel").addEventListener("click", (event) => {
    if ((event.target as Element | null)?.closest("[data-testid=panel-close]")) controller.clearSelection();
  });

  // Shader programs compile while the requests are in flight.
  controller.engine?.warmUp();

  let clusters: Cluster[];
  try {
    clusters = (await clustersRequest).results;
  } catch (error) {
    picker.replaceChildren(h("option", {}, "—"));
    title.textContent = "Could not load the clusters";
    controller.message(explain(error), "error");
    return;
  }
  if (clusters.length === 0) {
    picker.replaceChildren(h("option", {}, "no clusters"));
    title.textContent = "No cluster yet";
    controller.message(
      "Build one with: python manage.py build_cluster --preset seed-512 --supernodes 8 --name demo " +
        "(or POST /api/builds/, or add one in the admin).",
    );
    return;
  }
  picker.replaceChildren(...clusters.map((c) => h("option", { value: String(c.id) }, c.name)));

  let reportingTimer: number | null = null;
  const pollReporting = async (clusterId: number): Promise<void> => {
    try {
      const live = await api.get<{ cards: number; reporting: number }>(`telemetry/clusters/${clusterId}/`);
      if (controller.clusterId() === clusterId) status.setReporting(live.reporting, live.cards);
    } catch {
      if (controller.clusterId() === clusterId) status.setReporting(null, null);
    }
  };

  const show = async (cluster: Cluster, want: UrlState): Promise<void> => {
    picker.value = String(cluster.id);
    controller.onChange = (view) => writeUrl(cluster.id, view);
    document.title = `${cluster.name} · Supercluster Twin`;
    let wasLive = false;
    const live = new LiveClient(liveUrl(window.location, cluster.id), {
      state: (state, reason) => {
        controller.connection(state, reason);
        // Back after a drop: alert events sent meanwhile were missed; reload the list.
        if (state === "live" && wasLive) {
          void alerts.reset();
          void remediations.reset();
        }
        if (state === "live") wasLive = true;
      },
      hello: (hello) => controller.hello(hello),
      view: (msg) => {
        controller.frame(msg);
        facility.frame(msg);
      },
      alerts: (events, dropped) => alerts.push(events as unknown as AlertEvent[], dropped),
      remediation: (event, r) => remediations.push(event, r as unknown as RemediationPayload),
      // A refused subscription (an object deleted meanwhile): say so where the stream is shown.
      error: (msg) => status.setDetail(`live: ${msg.message}`),
    });
    if (reportingTimer !== null) window.clearInterval(reportingTimer);
    status.setReporting(null, null);
    const firstPoll = pollReporting(cluster.id);
    reportingTimer = window.setInterval(() => void pollReporting(cluster.id), REPORTING_POLL_MS);
    try {
      await controller.setCluster(cluster.id, { kind: want.view, id: want.id, metric: want.metric }, live);
    } catch (error) {
      controller.message(`Could not show ${cluster.name}: ${explain(error)}`, "error");
    }
    void facility.reset();
    // Asked for only now: at a million cards the summary's aggregates cost the
    // server ~5 s of CPU, which delayed the floor (and the first frame) when
    // both were requested together.
    const summaryRequest = api.summary(cluster.id);
    summaryRequest.catch(() => undefined);
    // The summary strip is filled last, once the cluster is shown (scene, panels,
    // status): its name there means the page has settled.
    await firstPoll;
    if (controller.clusterId() !== cluster.id) return;
    try {
      renderSummary(title, stats, await summaryRequest);
    } catch (error) {
      title.textContent = cluster.name;
      stats.replaceChildren(h("span", { class: "bad" }, `Summary unavailable: ${explain(error)}`));
    }
  };

  // Leaving through the logout form: let requests in flight finish first, so
  // the navigation does not cut them off (stop the polls and the stream).
  const logout = document.querySelector<HTMLFormElement>("form.logout");
  logout?.addEventListener("submit", (event) => {
    if (logout.dataset.leaving) return;
    event.preventDefault();
    logout.dataset.leaving = "1";
    if (reportingTimer !== null) window.clearInterval(reportingTimer);
    controller.live?.stop();
    void settled(2000).then(() => logout.submit());
  });

  const initial = clusters.find((c) => c.id === wanted.cluster) ?? clusters[0];
  picker.disabled = false;
  picker.addEventListener("change", () => {
    const cluster = clusters.find((c) => String(c.id) === picker.value);
    if (cluster) void show(cluster, { cluster: cluster.id, view: "cluster", id: null, metric: controller.metric() });
  });
  await show(
    initial,
    initial.id === wanted.cluster ? wanted : { cluster: initial.id, view: "cluster", id: null, metric: wanted.metric },
  );
}

void boot();
