/**
 * A what-if's racks on the floor: each rack coloured by its peak power in the what if
 * minus the baseline (`racks.peak_kw_difference`, kW) on a diverging scale centred on 0
 * (blue: less, grey: unchanged, red: more), with a button to go back to the live colours.
 *
 * The pure parts (`rackDifferences`, `differenceSpan`) are tested with vitest;
 * `mountWhatIfFloor` hands the map to `show` (the page's `showDifference`) and `null`
 * when it is destroyed.
 */
import { niceCeil } from "../colour";
import { button, h } from "./dom";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);

export type ShowDifference = (values: ReadonlyMap<number, number> | null, label: string, span: number) => void;

/** Rack id → peak kW difference (what if − baseline), or null without usable racks. */
export function rackDifferences(result: unknown): Map<number, number> | null {
  if (!isObj(result) || !isObj(result.racks)) return null;
  const { ids, peak_kw_difference: diff } = result.racks;
  if (!Array.isArray(ids) || !Array.isArray(diff) || ids.length !== diff.length || !ids.length) return null;
  const out = new Map<number, number>();
  ids.forEach((id, i) => {
    const d: unknown = diff[i];
    if (typeof id === "number" && typeof d === "number" && Number.isFinite(d)) out.set(id, d);
  });
  return out.size ? out : null;
}

/** The scale's half-width: the largest |difference| rounded up to a nice number (≥ 0.1 kW). */
export function differenceSpan(values: ReadonlyMap<number, number>): number {
  let m = 0;
  for (const v of values.values()) m = Math.max(m, Math.abs(v));
  return niceCeil(Math.max(m, 0.1));
}

export const DIFFERENCE_LABEL = "Peak rack power, what if − baseline";

/** The toggle under the what-if result; null when the result has no racks. */
export function mountWhatIfFloor(
  container: HTMLElement,
  result: unknown,
  show: ShowDifference,
): { destroy(): void } | null {
  const values = rackDifferences(result);
  if (!values) return null;
  const span = differenceSpan(values);
  let on = false;
  const toggle = button("Colour the floor by the difference", { "data-testid": "whatif-floor" }, () => {
    on = !on;
    show(on ? values : null, DIFFERENCE_LABEL, span);
    toggle.textContent = on ? "Back to the live colours" : "Colour the floor by the difference";
    toggle.dataset.on = String(on);
  });
  toggle.dataset.on = "false";
  container.append(h("div", { class: "tw-whatif-floor" }, toggle));
  return {
    destroy() {
      if (on) show(null, DIFFERENCE_LABEL, span);
      on = false;
      toggle.remove();
    },
  };
}
