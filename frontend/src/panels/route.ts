/**
 * The route panel: two cards (id or serial), fewest hops or lowest latency, Go →
 * GET /api/clusters/<id>/route/ → "N hops · X ns · bottleneck Y Gb/s", the path,
 * and the highlight in the scene (host.showRoute). 400s name the field to blame.
 */
import { ApiError, type Route } from "../api";
import { button, explain, h } from "./dom";
import { parseCardRef, routeSummary } from "./format";
import { flattenErrors } from "./scenarioform";
import type { PanelHost, RouteEnd } from "./host";

export interface RoutePanel {
  /** Fill one end (the card panel's route buttons); with both ends set, the route is computed. */
  setEnd(which: RouteEnd, cardId: number): void;
  /** Clear the inputs, the result and the highlight. */
  reset(): void;
  /** Compute the route of the current inputs (what Go does). */
  go(): Promise<void>;
}

export interface RouteOptions {
  /** Compute as soon as setEnd() has filled both ends (default true). */
  autoGo?: boolean;
}

/** The API's `notes` on a route (caveats of the model), if any. */
function notesOf(route: Route): string[] {
  return Array.isArray(route.notes) ? route.notes.map(String) : [];
}

export function mountRoute(el: HTMLElement, host: PanelHost, opts: RouteOptions = {}): RoutePanel {
  const autoGo = opts.autoGo ?? true;
  el.classList.add("tw-panel", "tw-route");
  if (!el.hasAttribute("data-testid")) el.setAttribute("data-testid", "route-panel");

  const src = h("input", {
    type: "text",
    "data-testid": "route-src",
    placeholder: "card id or serial",
    autocomplete: "off",
    spellcheck: "false",
  });
  const dst = h("input", {
    type: "text",
    "data-testid": "route-dst",
    placeholder: "card id or serial",
    autocomplete: "off",
    spellcheck: "false",
  });
  const srcErr = h("span", { class: "tw-field-error", "data-testid": "route-src-error" });
  const dstErr = h("span", { class: "tw-field-error", "data-testid": "route-dst-error" });
  const by = h(
    "select",
    { "data-testid": "route-by" },
    h("option", { value: "hops" }, "fewest hops"),
    h("option", { value: "latency" }, "lowest latency"),
  );
  const goBtn = h("button", { type: "submit", class: "tw-btn primary", "data-testid": "route-go" }, "Go");
  const clearBtn = button("Clear", { class: "tw-btn", "data-testid": "route-clear" }, () => panel.reset());
  const swapBtn = button("⇅", { class: "tw-icon", title: "Swap the ends", "aria-label": "Swap the ends" }, () => {
    [src.value, dst.value] = [dst.value, src.value];
  });
  const error = h("p", { class: "tw-error", "data-testid": "route-error", role: "alert" });
  const result = h("div", { class: "tw-route-result", "data-testid": "route-result" });
  const path = h("ol", { class: "tw-path", "data-testid": "route-path" });
  error.hidden = true;
  result.hidden = true;

  const form = h(
    "form",
    { class: "tw-form" },
    h("label", {}, h("span", {}, "From"), src, srcErr),
    h("label", {}, h("span", {}, "To"), dst, dstErr),
    h("label", {}, h("span", {}, "By"), by),
    h("div", { class: "tw-actions" }, goBtn, clearBtn, swapBtn),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    void panel.go();
  });
  el.replaceChildren(
    h("header", { class: "tw-head" }, h("h2", { class: "tw-title" }, "Route")),
    form,
    error,
    result,
    path,
  );

  let generation = 0;

  function clearErrors(): void {
    error.hidden = true;
    error.textContent = "";
    srcErr.textContent = "";
    dstErr.textContent = "";
    src.removeAttribute("aria-invalid");
    dst.removeAttribute("aria-invalid");
  }

  function showErrors(fields: Record<string, string[]>, general: string[]): void {
    const all: string[] = [...general];
    for (const [key, msgs] of Object.entries(fields)) {
      const text = msgs.join(" ");
      if (key === "src") {
        srcErr.textContent = text;
        src.setAttribute("aria-invalid", "true");
      } else if (key === "dst") {
        dstErr.textContent = text;
        dst.setAttribute("aria-invalid", "true");
      }
      all.push(key === "non_field_errors" || key === "detail" ? text : `${key}: ${text}`);
    }
    error.textContent = all.join(" · ");
    error.hidden = all.length === 0;
  }

  function clearResult(): void {
    result.hidden = true;
    result.textContent = "";
    delete result.dataset.hops;
    delete result.dataset.latencyNs;
    delete result.dataset.reachable;
    path.replaceChildren();
  }

  function render(route: Route): void {
    result.hidden = false;
    result.dataset.hops = String(route.hops);
    result.dataset.reachable = String(route.reachable);
    result.dataset.latencyNs = route.latency_ns === null ? "" : String(route.latency_ns);
    result.dataset.src = String(route.src.id);
    result.dataset.dst = String(route.dst.id);
    result.replaceChildren(
      h("p", { class: "tw-route-summary" }, routeSummary(route)),
      h("p", { class: "tw-muted" }, `${route.src.serial} → ${route.dst.serial} (by ${route.by})`),
      ...notesOf(route).map((n) => h("p", { class: "tw-note" }, n)),
    );
    path.replaceChildren(
      ...route.path.map((step, i) => {
        const li = h(
          "li",
          {
            class: `kind-${step.kind}`,
            "data-node": String(step.node),
            "data-card": step.card === null ? "" : String(step.card),
          },
          h("span", { class: "muted" }, step.kind),
          " ",
          step.label,
        );
        const linkId = i > 0 ? route.links[i - 1] : null;
        if (linkId !== null && linkId !== undefined) li.dataset.link = String(linkId);
        if (step.card !== null) {
          const card = step.card;
          li.classList.add("clickable");
          li.title = "Show this card";
          li.addEventListener("click", () => void host.select({ kind: "card", id: card }, { fly: true }));
        }
        return li;
      }),
    );
  }

  const panel: RoutePanel = {
    setEnd(which: RouteEnd, cardId: number): void {
      (which === "src" ? src : dst).value = String(cardId);
      if (autoGo && src.value.trim() && dst.value.trim()) void panel.go();
    },
    reset(): void {
      generation += 1;
      src.value = "";
      dst.value = "";
      clearErrors();
      clearResult();
      el.removeAttribute("aria-busy");
      void host.showRoute(null);
    },
    async go(): Promise<void> {
      const gen = ++generation;
      clearErrors();
      const a = parseCardRef(src.value);
      const b = parseCardRef(dst.value);
      const missing: Record<string, string[]> = {};
      if (a === null) missing.src = ["give a card id or serial"];
      if (b === null) missing.dst = ["give a card id or serial"];
      if (a === null || b === null) {
        showErrors(missing, []);
        return;
      }
      el.setAttribute("aria-busy", "true");
      try {
        const q = new URLSearchParams({ src: String(a), dst: String(b), by: by.value });
        const route = await host.api.get<Route>(`clusters/${host.clusterId()}/route/?${q}`);
        if (gen !== generation) return;
        render(route);
        await host.showRoute(route);
      } catch (err) {
        if (gen !== generation) return;
        clearResult();
        void host.showRoute(null);
        if (err instanceof ApiError && err.status === 400 && err.body && typeof err.body === "object") {
          const flat = flattenErrors(err.body);
          const general = Object.keys(flat).length ? [] : [explain(err)];
          showErrors(flat, general);
        } else {
          showErrors({}, [explain(err)]);
        }
      } finally {
        if (gen === generation) {
          el.removeAttribute("aria-busy");
        }
      }
    },
  };
  return panel;
}
