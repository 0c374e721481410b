/**
 * `window.twin`: the test hook the browser tests and the frontend benchmark
 * read (the contract in the project notes). It is installed before anything
 * else runs, always present and cheap: every function delegates to the page
 * once it is up and answers "nothing yet" before.
 */
import type { ViewKind } from "./frames";

export interface TwinHook {
  ready: boolean;
  firstFrameMs: number | null;
  view: { kind: ViewKind; id: number | null; metric: string };
  keys(): number[];
  colourOf(key: number): string | null;
  valueOf(key: number): number | null;
  screenOf(key: number): { x: number; y: number } | null;
  /** What a click at CSS px (x, y) would pick: {kind, id} or null. */
  pickAt(x: number, y: number): { kind: string; id: number } | null;
  /** The rack view's power bar (W), or null in the other views. */
  rackDraw(): number | null;
  frames: number;
  lastColourUpdateMs: number | null;
  open(kind: ViewKind, id?: number | null): Promise<void>;
  select(kind: string, id: number): Promise<void>;
  route: { cards: number[]; links: number[] } | null;
  highlighted(): number;
  memory(): { jsHeapUsed: number | null };
  /** The floor's switch and CDU markers are drawn (false until their data is in). */
  markersReady: boolean;
  /** The floor's markers as the what-if names them ({kind: "switch", id} / {kind: "cdu", key}). */
  markers(): Array<{ kind: string; id?: number; key?: string }>;
  /** Where a right-click hits a marker (CSS px), or null when it is not on screen. */
  markerScreenOf(marker: { kind: string; id?: number; key?: string }): { x: number; y: number } | null;
}

/** What the page provides to the hook once it is up. */
export interface HookBackend {
  keys(): number[];
  colourOf(key: number): string | null;
  valueOf(key: number): number | null;
  screenOf(key: number): { x: number; y: number } | null;
  pickAt(x: number, y: number): { kind: string; id: number } | null;
  rackDraw(): number | null;
  open(kind: ViewKind, id: number | null): Promise<void>;
  select(kind: string, id: number): Promise<void>;
  highlighted(): number;
  markers(): Array<{ kind: string; id?: number; key?: string }>;
  markerScreenOf(marker: { kind: string; id?: number; key?: string }): { x: number; y: number } | null;
}

declare global {
  interface Window {
    twin: TwinHook;
  }
}

let backend: HookBackend | null = null;

function memory(): { jsHeapUsed: number | null } {
  const m = (performance as Performance & { memory?: { usedJSHeapSize: number } }).memory;
  return { jsHeapUsed: m ? m.usedJSHeapSize : null };
}

/** Install `window.twin` (idempotent) and return it. */
export function installHook(): TwinHook {
  if (window.twin) return window.twin;
  const hook: TwinHook = {
    ready: false,
    firstFrameMs: null,
    view: { kind: "cluster", id: null, metric: "power_w" },
    keys: () => (backend ? backend.keys() : []),
    colourOf: (key) => (backend ? backend.colourOf(key) : null),
    valueOf: (key) => (backend ? backend.valueOf(key) : null),
    screenOf: (key) => (backend ? backend.screenOf(key) : null),
    pickAt: (x, y) => (backend ? backend.pickAt(x, y) : null),
    rackDraw: () => (backend ? backend.rackDraw() : null),
    frames: 0,
    lastColourUpdateMs: null,
    open: async (kind, id = null) => {
      if (!backend) throw new Error("the dashboard is not up yet");
      await backend.open(kind, id ?? null);
    },
    select: async (kind, id) => {
      if (!backend) throw new Error("the dashboard is not up yet");
      await backend.select(kind, id);
    },
    route: null,
    highlighted: () => (backend ? backend.highlighted() : 0),
    memory,
    markersReady: false,
    markers: () => (backend ? backend.markers() : []),
    markerScreenOf: (marker) => (backend ? backend.markerScreenOf(marker) : null),
  };
  window.twin = hook;
  return hook;
}

/** Connect the hook to the page. */
export function bindHook(impl: HookBackend): TwinHook {
  backend = impl;
  return installHook();
}
