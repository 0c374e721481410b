/**
 * What the scene can be coloured by: the metric list (from the live stream's
 * hello, or the REST list when the stream is slower) and the "Colour by"
 * picker built from it, key metrics first.
 */
import { ApiError, type Api, type Metric } from "../api";
import { HEALTH_METRIC, type MetricLike } from "../colour";
import type { HelloMessage } from "../live";
import type { MetricInfo } from "../panels/host";
import { JOB_METRICS } from "../panels/jobs";
import { PLANT_GROUP } from "../plant";

/** Metrics shown first in the picker (the issue's list), the rest follow. */
export const KEY_METRICS = ["power_w", "gpu_util", "gpu_temp_c", "hbm_used_gib", "health", "job", "tenant"];

export class MetricMenu {
  /** The metrics the server streams (empty until it said). */
  list: MetricInfo[] = [];
  /** The plant's per-rack metrics (the floor only; empty until the hello said). */
  plant: MetricInfo[] = [];

  constructor(
    private readonly api: Api,
    private readonly select: HTMLSelectElement,
  ) {}

  /** The live stream's hello: its metric list wins over the REST one. */
  fromHello(hello: HelloMessage): void {
    this.list = hello.metrics.map((m) => ({ key: m.key, label: m.label, unit: m.unit, aggregate: m.aggregate }));
    this.plant = (hello.plant_metrics ?? []).map((m) => ({
      key: m.key,
      label: m.label,
      unit: m.unit,
      aggregate: m.aggregate,
    }));
  }

  /** The REST list, unless the hello came first (a refusal leaves the list to the hello). */
  async load(): Promise<void> {
    try {
      const list = await this.api.get<Metric[]>("telemetry/metrics/");
      if (this.list.length === 0) this.list = list.map((m) => ({ key: m.key, label: m.label, unit: m.unit }));
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      // The hello message brings the list too.
    }
  }

  /** Label and unit of a metric (health included; an unknown key stands for itself). */
  info(key: string): MetricLike {
    if (key === "health") return HEALTH_METRIC;
    const job = JOB_METRICS.find((m) => m.key === key);
    if (job) return job;
    return (
      this.list.find((m) => m.key === key) ?? this.plant.find((m) => m.key === key) ?? { key, label: key, unit: "" }
    );
  }

  /** (Re)build the picker when the metrics changed, with `current` chosen; health only for
   *  card views, the "Plant" group (coolant, hottest card, caps) only on the floor. */
  fill(current: string, cardView: boolean): void {
    const select = this.select;
    const all: MetricLike[] = [...this.list];
    if (cardView) all.push(HEALTH_METRIC, ...JOB_METRICS);
    else all.push(...this.plant);
    if (all.length === 0) all.push({ key: current, label: current, unit: "" });
    const signature = `${cardView ? "cards" : "floor"}:${all.map((m) => m.key).join(",")}`;
    if (select.dataset.signature !== signature) {
      const plantKeys = cardView ? [] : PLANT_GROUP;
      const key = all
        .filter((m) => KEY_METRICS.includes(m.key) && !plantKeys.includes(m.key))
        .sort((a, b) => KEY_METRICS.indexOf(a.key) - KEY_METRICS.indexOf(b.key));
      const plant = all
        .filter((m) => plantKeys.includes(m.key))
        .sort((a, b) => plantKeys.indexOf(a.key) - plantKeys.indexOf(b.key));
      const rest = all.filter((m) => !KEY_METRICS.includes(m.key) && !plantKeys.includes(m.key));
      const group = (label: string, items: MetricLike[]): HTMLOptGroupElement => {
        const g = document.createElement("optgroup");
        g.label = label;
        for (const m of items) {
          const o = document.createElement("option");
          o.value = m.key;
          o.textContent =
            m.key === "health"
              ? "Health (alerts, staleness)"
              : !cardView && m.key === "gpu_temp_c" && label === "Plant"
                ? `Card temperature, hottest per rack (${m.unit})`
                : `${m.label}${m.unit ? ` (${m.unit})` : ""}`;
          g.append(o);
        }
        return g;
      };
      const groups = [group("Key metrics", key)];
      if (plant.length) groups.push(group("Plant", plant));
      groups.push(group("All metrics", rest));
      select.replaceChildren(...groups);
      select.dataset.signature = signature;
    }
    select.value = current;
    select.disabled = false;
  }
}
