/**
 * The status bar: connection state, age of the last live frame (ticking every
 * 250 ms, so a stalled stream is visible at once), and cards reporting.
 *
 * The frame age is measured on this browser's clock from when the frame
 * arrived, not from the server's timestamp, so clock skew between the
 * machines cannot make it lie.
 */
import type { ConnectionState } from "./live";

const STATE_TEXT: Record<ConnectionState, string> = {
  connecting: "Connecting…",
  live: "Live",
  reconnecting: "Reconnecting…",
  offline: "Offline",
};

/** "0.4 s" under 10 s, "12 s" under a minute, then "3 min", "2 h". */
export function formatAge(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms) || ms < 0) return "—";
  const s = ms / 1000;
  if (s < 10) return `${s.toFixed(1)} s`;
  if (s < 60) return `${Math.round(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  return `${Math.floor(s / 3600)} h`;
}

export class StatusBar {
  private readonly connection: HTMLElement;
  private readonly age: HTMLElement;
  private readonly reporting: HTMLElement;
  private readonly detail: HTMLElement;
  private lastFrameAt: number | null = null;
  private timer: number | null = null;

  constructor(readonly el: HTMLElement) {
    const find = (id: string): HTMLElement => {
      const found = el.querySelector<HTMLElement>(`[data-testid=${id}]`);
      if (!found) throw new Error(`status bar markup misses [data-testid=${id}]`);
      return found;
    };
    this.connection = find("status-connection");
    this.age = find("status-frame-age");
    this.reporting = find("status-reporting");
    this.detail = el.querySelector<HTMLElement>("[data-role=status-detail]") ?? el;
    this.setState("offline");
    this.setReporting(null, null);
    this.tick();
  }

  start(): void {
    if (this.timer === null) this.timer = window.setInterval(() => this.tick(), 250);
  }

  stop(): void {
    if (this.timer !== null) window.clearInterval(this.timer);
    this.timer = null;
  }

  setState(state: ConnectionState, text?: string): void {
    this.connection.dataset.state = state;
    this.connection.textContent = text ?? STATE_TEXT[state];
  }

  /** A live frame (or snapshot) arrived now. */
  frame(at = performance.now()): void {
    this.lastFrameAt = at;
    this.tick();
  }

  /** Forget the last frame (another cluster is shown). */
  reset(): void {
    this.lastFrameAt = null;
    this.tick();
  }

  setReporting(count: number | null, total: number | null): void {
    this.reporting.dataset.count = count === null ? "" : String(count);
    this.reporting.textContent =
      count === null
        ? "— cards reporting"
        : `${count.toLocaleString("en-US")}${total !== null ? ` / ${total.toLocaleString("en-US")}` : ""} cards reporting`;
  }

  /** Free text next to the state (e.g. the tick number). */
  setDetail(text: string): void {
    if (this.detail !== this.el) this.detail.textContent = text;
  }

  private tick(): void {
    const ms = this.lastFrameAt === null ? null : performance.now() - this.lastFrameAt;
    this.age.dataset.ageMs = ms === null ? "" : String(Math.round(ms));
    this.age.textContent = formatAge(ms);
    this.age.classList.toggle("stale", ms !== null && ms > 5000);
  }
}
