/**
 * Playback of a `scheduling` run's placements on the floor: a policy picker, a time
 * slider and a play button; at each point the floor's racks are coloured by the share
 * of their cards the policy has allocated then (`rack_timeline` of each policy: cards
 * allocated per rack at K points — simulated seconds, or arrivals in arrival-only
 * mode — and the result's `racks`: ids and healthy cards).
 *
 * The pure parts (`playbackPolicies`, `rackShares`, `frameLabel`, `nextFrame`) are
 * tested with vitest; `mountPlayback` hands each frame's shares to `show` (the
 * page's `showPlayback`, which paints the floor) and `null` when it is destroyed.
 */
import { button, h } from "./dom";
import { formatNumber } from "./format";

export interface RackTimeline {
  axis: "time_s" | "arrivals";
  t: number[];
  allocated: number[][];
}

interface Racks {
  ids: number[];
  cards: number[];
}

export interface PlaybackPolicy {
  policy: string;
  timeline: RackTimeline;
}

/** The racks of the run (null: none, e.g. a trace's nodes or a cluster too big to play back). */
export function racksOf(result: unknown): Racks | null {
  if (typeof result !== "object" || result === null) return null;
  const racks = (result as { racks?: Racks | null }).racks;
  return racks && Array.isArray(racks.ids) && Array.isArray(racks.cards) ? racks : null;
}

/** The cluster the run replayed on (null: a trace's or uniform nodes). */
export function clusterOf(result: unknown): number | null {
  const nodes = (result as { nodes?: { cluster?: { id?: number } } } | null)?.nodes;
  return typeof nodes?.cluster?.id === "number" ? nodes.cluster.id : null;
}

/** The policies that carry a rack timeline. */
export function playbackPolicies(result: unknown): PlaybackPolicy[] {
  if (!racksOf(result)) return [];
  const list = (result as { policies?: unknown }).policies;
  if (!Array.isArray(list)) return [];
  const out: PlaybackPolicy[] = [];
  for (const p of list as Array<{ policy?: unknown; rack_timeline?: RackTimeline | null } | null>) {
    const timeline = p?.rack_timeline;
    if (timeline && Array.isArray(timeline.t) && timeline.t.length > 0)
      out.push({ policy: String(p.policy), timeline });
  }
  return out;
}

/** Rack id → allocated share of its cards (0..1) at point `k` (racks without cards left out). */
export function rackShares(racks: Racks, timeline: RackTimeline, k: number): Map<number, number> {
  const row = timeline.allocated[Math.max(0, Math.min(k, timeline.allocated.length - 1))] ?? [];
  const out = new Map<number, number>();
  racks.ids.forEach((id, i) => {
    const cards = racks.cards[i];
    if (cards > 0) out.set(id, Math.max(0, Math.min(1, (row[i] ?? 0) / cards)));
  });
  return out;
}

/** "t = 1,200 s" or "after 350 arrivals", and the cluster-wide share allocated then. */
export function frameLabel(racks: Racks, timeline: RackTimeline, k: number): string {
  const t = timeline.t[k] ?? 0;
  const row = timeline.allocated[k] ?? [];
  const total = racks.cards.reduce((a, b) => a + b, 0);
  const used = row.reduce((a, b) => a + b, 0);
  const when =
    timeline.axis === "arrivals" ? `after ${formatNumber(Math.round(t), 6)} arrivals` : `t = ${formatNumber(t, 6)} s`;
  return `${when}: ${total > 0 ? formatNumber((100 * used) / total, 3) : "0"} % of the cards allocated`;
}

/** The point after `k` while playing (null at the end: stop). */
export function nextFrame(k: number, points: number): number | null {
  return k + 1 < points ? k + 1 : null;
}

export interface Playback {
  destroy(): void;
}

/** Shares of a frame to paint, with the legend's title; null = back to the live colours. */
export type ShowPlayback = (shares: ReadonlyMap<number, number> | null, label: string) => void;

/** Policy picker, slider and play button into `container`; null when the result has no playback. */
export function mountPlayback(
  container: HTMLElement,
  result: unknown,
  show: ShowPlayback,
  intervalMs = 300,
): Playback | null {
  const racks = racksOf(result);
  const policies = playbackPolicies(result);
  if (!racks || policies.length === 0) return null;
  let current = policies[0];
  let timer: ReturnType<typeof setInterval> | null = null;
  const select = h("select", { "data-testid": "playback-policy" });
  for (const p of policies) select.append(h("option", { value: p.policy }, p.policy));
  const slider = h("input", {
    type: "range",
    min: "0",
    max: String(current.timeline.t.length - 1),
    value: "0",
    step: "1",
    "data-testid": "playback-slider",
    "aria-label": "Time",
  });
  const label = h("span", { class: "tw-help", "data-testid": "playback-label" });
  const paint = () => {
    const k = Number(slider.value);
    label.textContent = frameLabel(racks, current.timeline, k);
    show(rackShares(racks, current.timeline, k), `${current.policy}: allocated cards`);
    box.dataset.frame = String(k);
  };
  const stop = () => {
    if (timer !== null) clearInterval(timer);
    timer = null;
    play.textContent = "Play";
  };
  const play = button("Play", { "data-testid": "playback-play" }, () => {
    if (timer !== null) return stop();
    if (nextFrame(Number(slider.value), current.timeline.t.length) === null) slider.value = "0";
    play.textContent = "Pause";
    timer = setInterval(() => {
      const k = nextFrame(Number(slider.value), current.timeline.t.length);
      if (k === null) return stop();
      slider.value = String(k);
      paint();
    }, intervalMs);
    paint();
  });
  select.addEventListener("change", () => {
    current = policies.find((p) => p.policy === select.value) ?? policies[0];
    slider.max = String(current.timeline.t.length - 1);
    paint();
  });
  slider.addEventListener("input", () => {
    stop();
    paint();
  });
  const box = h(
    "div",
    { class: "tw-playback", "data-testid": "scheduling-playback" },
    h("h4", {}, "Placements on the floor"),
    h("div", { class: "tw-playback-controls" }, select, play, slider),
    label,
  );
  container.append(box);
  paint();
  return {
    destroy() {
      stop();
      show(null, "");
    },
  };
}
