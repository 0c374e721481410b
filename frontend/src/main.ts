/**
 * Dashboard entry: fills the header's cluster picker from GET /api/clusters/,
 * then shows the chosen cluster's summary (GET /api/clusters/<id>/summary/) and
 * rack floor. The chosen cluster is kept in the URL (?cluster=<id>) so a link
 * or a reload shows the same one.
 */
import "./style.css";

import { Api, ApiError, type Cluster } from "./api";
import { h, renderMessage, renderSummary } from "./dashboard";

function selectedFromUrl(): number | null {
  const value = new URLSearchParams(window.location.search).get("cluster");
  const id = value === null ? Number.NaN : Number.parseInt(value, 10);
  return Number.isFinite(id) ? id : null;
}

function explain(error: unknown): string {
  if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
    return "The API refused the request: log in again (your session may have expired).";
  }
  return error instanceof Error ? error.message : String(error);
}

async function showCluster(api: Api, root: HTMLElement, cluster: Cluster): Promise<void> {
  root.setAttribute("aria-busy", "true");
  try {
    const [summary, racks] = await Promise.all([api.summary(cluster.id), api.racks(cluster.id)]);
    renderSummary(root, summary, racks);
    document.title = `${summary.name} · Supercluster Twin`;
  } catch (error) {
    renderMessage(root, `Could not load ${cluster.name}`, explain(error), "error");
  } finally {
    root.removeAttribute("aria-busy");
  }
}

async function boot(): Promise<void> {
  const root = document.getElementById("app");
  const picker = document.getElementById("cluster-picker") as HTMLSelectElement | null;
  if (!root || !picker) {
    throw new Error("dashboard markup missing: #app and #cluster-picker are required");
  }
  const api = new Api(root.dataset.apiRoot ?? "/api/");
  renderMessage(root, "Loading…", "Fetching the clusters.");

  let clusters: Cluster[];
  try {
    clusters = (await api.clusters()).results;
  } catch (error) {
    picker.replaceChildren(h("option", {}, "—"));
    renderMessage(root, "Could not load the clusters", explain(error), "error");
    return;
  }
  if (clusters.length === 0) {
    picker.replaceChildren(h("option", {}, "no clusters"));
    renderMessage(
      root,
      "No cluster yet",
      "Build one with: python manage.py build_cluster --preset seed-512 --supernodes 8 " +
        "--name demo (or POST /api/builds/, or add one in the admin).",
    );
    return;
  }

  picker.replaceChildren(
    ...clusters.map((c) => h("option", { value: String(c.id) }, c.name)),
  );
  const wanted = selectedFromUrl();
  const initial = clusters.find((c) => c.id === wanted) ?? clusters[0];
  picker.value = String(initial.id);
  picker.disabled = false;
  picker.addEventListener("change", () => {
    const cluster = clusters.find((c) => String(c.id) === picker.value);
    if (!cluster) return;
    const url = new URL(window.location.href);
    url.searchParams.set("cluster", String(cluster.id));
    window.history.replaceState(null, "", url);
    void showCluster(api, root, cluster);
  });
  await showCluster(api, root, initial);
}

void boot();
