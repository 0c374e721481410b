/**
 * The websocket client of `ws/clusters/<id>/` (twin/live/consumers.py).
 *
 * - hello → the metric list; then the page's current view is subscribed
 *   (one subscription at a time: switching view or metric unsubscribes first);
 * - snapshot / frame → handed to the page, which decodes them (frames.ts);
 * - alerts → handed to the alerts panel;
 * - remediation → handed to the self-healing panel;
 * - a ping every 15 s; no message for 45 s means the connection is dead even
 *   if the browser has not noticed, so it is closed and reopened;
 * - after any close but a refusal the client reconnects by itself with a
 *   backoff of 1 s doubling to 10 s, with jitter (so a restarted server is not
 *   hit by every tab in the same millisecond), and resubscribes;
 * - close 4401 (not logged in) and 4404 (no such cluster) are final: the page
 *   tells the user what to do instead of retrying forever (the codes come from
 *   the server, twin/live/protocol.py, through the page's config);
 * - close 4503 (Redis or the database away) is retried like any other close,
 *   with the reason "service unavailable" for the status bar; the snapshots
 *   after the reconnect replace the state (their `seq` never went back).
 */
import { config } from "./config";
import type { FrameMessage } from "./frames";
import type { Subscription } from "./frames";

export type ConnectionState = "connecting" | "live" | "reconnecting" | "offline";

export interface HelloMessage {
  type: "hello";
  cluster: number;
  views: string[];
  metrics: Array<{ key: string; label: string; unit: string; aggregate: string }>;
  /** The plant's per-rack metrics, streamed by the cluster view only (twin/live/frames.py). */
  plant_metrics?: Array<{ key: string; label: string; unit: string; aggregate: string; views?: string[] }>;
  default_metric: Record<string, string>;
  max_hz: number;
  health_names: string[];
}

export interface LiveHandlers {
  state(state: ConnectionState, reason?: string): void;
  hello(hello: HelloMessage): void;
  view(msg: FrameMessage): void;
  alerts(events: Array<{ event: string; alert: Record<string, unknown> }>, dropped: number): void;
  /** A self-healing decision (`{"type": "remediation", "event", "remediation"}`). */
  remediation?(event: string, remediation: Record<string, unknown>): void;
  error?(msg: { code: string; message: string; field?: string }): void;
}

export interface LiveOptions {
  backoffMinMs?: number;
  backoffMaxMs?: number;
  pingMs?: number;
  /** A message must arrive within this long (pongs count), else reconnect. */
  deadMs?: number;
  random?: () => number;
}

/** The websocket URL of a cluster on this page's origin (wss on https). */
export function liveUrl(location: { protocol: string; host: string }, clusterId: number): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/ws/clusters/${clusterId}/`;
}

/**
 * Delay before reconnect attempt `attempt` (0-based): min × 2^attempt capped at
 * max, then ±25 % jitter (never below min/2).
 */
export function backoffDelay(attempt: number, minMs = 1000, maxMs = 10_000, random = Math.random): number {
  const base = Math.min(maxMs, minMs * 2 ** Math.max(0, attempt));
  const jittered = base * (0.75 + random() * 0.5);
  return Math.round(Math.max(minMs / 2, Math.min(maxMs * 1.25, jittered)));
}

export class LiveClient {
  state: ConnectionState = "offline";
  hello: HelloMessage | null = null;
  private socket: WebSocket | null = null;
  private sub: Subscription | null = null;
  private attempt = 0;
  private stopped = true;
  private retryTimer: number | null = null;
  private pingTimer: number | null = null;
  private lastMessageAt = 0;
  private readonly opts: Required<LiveOptions>;

  constructor(
    readonly url: string,
    private readonly on: LiveHandlers,
    opts: LiveOptions = {},
  ) {
    this.opts = {
      backoffMinMs: opts.backoffMinMs ?? 1000,
      backoffMaxMs: opts.backoffMaxMs ?? 10_000,
      pingMs: opts.pingMs ?? 15_000,
      deadMs: opts.deadMs ?? 45_000,
      random: opts.random ?? Math.random,
    };
  }

  start(): void {
    this.stopped = false;
    this.connect();
  }

  /** Close for good (page leaves the cluster). */
  stop(): void {
    this.stopped = true;
    this.clearTimers();
    const s = this.socket;
    this.socket = null;
    if (s) {
      s.onclose = null;
      s.onmessage = null;
      s.onerror = null;
      s.close(1000, "bye");
    }
    this.setState("offline");
  }

  /** Follow one view (replacing the previous subscription); resent after reconnects. */
  subscribe(sub: Subscription): void {
    const previous = this.sub;
    this.sub = { ...sub };
    if (this.state !== "live") return; // sent after hello
    if (previous) this.send({ action: "unsubscribe" });
    this.sendSubscribe();
  }

  /** Follow nothing (a view without live values, e.g. a rack holding no cards). */
  unsubscribe(): void {
    if (this.sub && this.state === "live") this.send({ action: "unsubscribe" });
    this.sub = null;
  }

  current(): Subscription | null {
    return this.sub;
  }

  private sendSubscribe(): void {
    if (!this.sub) return;
    const msg: Record<string, unknown> = { action: "subscribe", view: this.sub.view, metric: this.sub.metric };
    if (this.sub.view !== "cluster") msg.id = this.sub.id;
    this.send(msg);
  }

  private send(msg: unknown): void {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(msg));
  }

  private setState(state: ConnectionState, reason?: string): void {
    this.state = state;
    this.on.state(state, reason);
  }

  private connect(): void {
    if (this.stopped) return;
    this.clearTimers();
    this.setState(this.attempt === 0 && !this.hello ? "connecting" : "reconnecting");
    let socket: WebSocket;
    try {
      socket = new WebSocket(this.url);
    } catch (error) {
      this.scheduleRetry(error instanceof Error ? error.message : String(error));
      return;
    }
    this.socket = socket;
    socket.onopen = () => {
      this.lastMessageAt = performance.now();
      this.pingTimer = window.setInterval(() => this.heartbeat(), this.opts.pingMs);
    };
    socket.onmessage = (event) => {
      this.lastMessageAt = performance.now();
      this.dispatch(typeof event.data === "string" ? event.data : "");
    };
    socket.onerror = () => {
      // The close event follows with the code; nothing to do here.
    };
    socket.onclose = (event) => {
      if (this.socket !== socket) return;
      this.socket = null;
      this.clearTimers();
      if (this.stopped) return;
      const codes = config().close_codes;
      if (event.code === codes.unauthenticated) {
        this.stopped = true;
        this.setState("offline", "unauthenticated");
        return;
      }
      if (event.code === codes.not_found) {
        this.stopped = true;
        this.setState("offline", "not-found");
        return;
      }
      if (event.code === codes.unavailable) {
        this.scheduleRetry("service unavailable");
        return;
      }
      this.scheduleRetry(`closed (${event.code})`);
    };
  }

  private heartbeat(): void {
    if (performance.now() - this.lastMessageAt > this.opts.deadMs) {
      // Silent for too long: a half-open connection. Drop it and reconnect.
      const s = this.socket;
      this.socket = null;
      if (s) {
        s.onclose = null;
        s.close(4000, "no heartbeat");
      }
      this.clearTimers();
      this.scheduleRetry("no heartbeat");
      return;
    }
    this.send({ action: "ping" });
  }

  private scheduleRetry(reason: string): void {
    if (this.stopped) return;
    const delay = backoffDelay(this.attempt, this.opts.backoffMinMs, this.opts.backoffMaxMs, this.opts.random);
    this.attempt += 1;
    this.setState("reconnecting", reason);
    this.retryTimer = window.setTimeout(() => {
      this.retryTimer = null;
      this.connect();
    }, delay);
  }

  private clearTimers(): void {
    if (this.retryTimer !== null) window.clearTimeout(this.retryTimer);
    if (this.pingTimer !== null) window.clearInterval(this.pingTimer);
    this.retryTimer = null;
    this.pingTimer = null;
  }

  private dispatch(text: string): void {
    let msg: { type?: string } & Record<string, unknown>;
    try {
      msg = JSON.parse(text) as { type?: string } & Record<string, unknown>;
    } catch {
      return;
    }
    switch (msg.type) {
      case "hello":
        this.hello = msg as unknown as HelloMessage;
        this.attempt = 0;
        this.setState("live");
        this.on.hello(this.hello);
        this.sendSubscribe();
        break;
      case "snapshot":
      case "frame":
        this.on.view(msg as unknown as FrameMessage);
        break;
      case "alerts":
        this.on.alerts(
          (msg.events as Array<{ event: string; alert: Record<string, unknown> }>) ?? [],
          Number(msg.dropped ?? 0),
        );
        break;
      case "remediation":
        this.on.remediation?.(
          typeof msg.event === "string" ? msg.event : "",
          (msg.remediation as Record<string, unknown>) ?? {},
        );
        break;
      case "error":
        this.on.error?.(msg as unknown as { code: string; message: string; field?: string });
        break;
      default:
        break; // pong, unsubscribed
    }
  }
}
