import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { LiveClient, backoffDelay, liveUrl, type ConnectionState } from "./live";

/** A WebSocket stand-in: records what is sent; the test drives open/message/close. */
class FakeSocket {
  static OPEN = 1;
  static all: FakeSocket[] = [];
  readyState = 0;
  sent: unknown[] = [];
  onopen: (() => void) | null = null;
  onmessage: ((e: { data: string }) => void) | null = null;
  onclose: ((e: { code: number }) => void) | null = null;
  onerror: (() => void) | null = null;
  constructor(readonly url: string) {
    FakeSocket.all.push(this);
  }
  send(text: string): void {
    this.sent.push(JSON.parse(text));
  }
  close(): void {
    this.readyState = 3;
  }
  open(): void {
    this.readyState = 1;
    this.onopen?.();
  }
  receive(msg: unknown): void {
    this.onmessage?.({ data: JSON.stringify(msg) });
  }
  drop(code = 1006): void {
    this.readyState = 3;
    this.onclose?.({ code });
  }
}

const HELLO = {
  type: "hello",
  cluster: 1,
  views: [],
  metrics: [{ key: "power_w", label: "Power", unit: "W", aggregate: "draw" }],
  default_metric: {},
  max_hz: 2,
  health_names: [],
};

describe("liveUrl / backoffDelay", () => {
  it("uses wss on https and the cluster's path", () => {
    expect(liveUrl({ protocol: "https:", host: "twin.example:8443" }, 7)).toBe(
      "wss://twin.example:8443/ws/clusters/7/",
    );
    expect(liveUrl({ protocol: "http:", host: "127.0.0.1:8000" }, 1)).toBe("ws://127.0.0.1:8000/ws/clusters/1/");
  });
  it("doubles from 1 s up to 10 s, with ±25 % jitter", () => {
    const mid = () => 0.5;
    expect([0, 1, 2, 3, 4, 5, 9].map((a) => backoffDelay(a, 1000, 10_000, mid))).toEqual([
      1000, 2000, 4000, 8000, 10_000, 10_000, 10_000,
    ]);
    expect(backoffDelay(0, 1000, 10_000, () => 0)).toBe(750);
    expect(backoffDelay(0, 1000, 10_000, () => 0.999)).toBeLessThanOrEqual(1250);
    expect(backoffDelay(10, 1000, 10_000, () => 0.999)).toBeLessThanOrEqual(12_500);
  });
});

describe("LiveClient", () => {
  const states: Array<[ConnectionState, string | undefined]> = [];
  const views: unknown[] = [];
  const alerts: unknown[] = [];
  let client: LiveClient;

  beforeEach(() => {
    vi.useFakeTimers();
    FakeSocket.all = [];
    states.length = 0;
    views.length = 0;
    alerts.length = 0;
    vi.stubGlobal("WebSocket", FakeSocket);
    vi.stubGlobal("window", globalThis);
    client = new LiveClient(
      "ws://x/ws/clusters/1/",
      {
        state: (s, r) => states.push([s, r]),
        hello: () => undefined,
        view: (m) => views.push(m),
        alerts: (events) => alerts.push(...events),
      },
      { random: () => 0.5 },
    );
  });
  afterEach(() => {
    client.stop();
    vi.useRealTimers();
    vi.unstubAllGlobals();
  });

  it("subscribes after hello, and switches by unsubscribing first", () => {
    client.subscribe({ view: "cluster", id: null, metric: "power_w" });
    client.start();
    const s = FakeSocket.all[0];
    s.open();
    expect(s.sent).toEqual([]); // nothing before hello
    s.receive(HELLO);
    expect(client.state).toBe("live");
    expect(s.sent).toEqual([{ action: "subscribe", view: "cluster", metric: "power_w" }]);
    client.subscribe({ view: "supernode", id: 3, metric: "gpu_util" });
    expect(s.sent.slice(1)).toEqual([
      { action: "unsubscribe" },
      { action: "subscribe", view: "supernode", metric: "gpu_util", id: 3 },
    ]);
    s.receive({ type: "frame", view: "supernode", id: 3, metric: "gpu_util", seq: 2, values: [] });
    s.receive({ type: "alerts", events: [{ event: "opened", alert: { id: 1 } }], dropped: 0 });
    expect(views).toHaveLength(1);
    expect(alerts).toEqual([{ event: "opened", alert: { id: 1 } }]);
  });

  it("reconnects with backoff after a drop and resubscribes", () => {
    client.subscribe({ view: "rack", id: 5, metric: "power_w" });
    client.start();
    FakeSocket.all[0].open();
    FakeSocket.all[0].receive(HELLO);
    FakeSocket.all[0].drop(1012);
    expect(client.state).toBe("reconnecting");
    vi.advanceTimersByTime(999);
    expect(FakeSocket.all).toHaveLength(1);
    vi.advanceTimersByTime(2);
    expect(FakeSocket.all).toHaveLength(2);
    FakeSocket.all[1].drop(1006); // still down: the next wait doubles
    vi.advanceTimersByTime(1999);
    expect(FakeSocket.all).toHaveLength(2);
    vi.advanceTimersByTime(2);
    const s = FakeSocket.all[2];
    s.open();
    s.receive(HELLO);
    expect(client.state).toBe("live");
    expect(s.sent).toEqual([{ action: "subscribe", view: "rack", metric: "power_w", id: 5 }]);
    expect(states.map((x) => x[0])).toEqual([
      "connecting",
      "live",
      "reconnecting",
      "reconnecting",
      "reconnecting",
      "reconnecting",
      "live",
    ]);
  });

  it("stops for good on 4401 (log in) and 4404 (no such cluster)", () => {
    client.start();
    FakeSocket.all[0].drop(4401);
    expect(states.at(-1)).toEqual(["offline", "unauthenticated"]);
    vi.advanceTimersByTime(60_000);
    expect(FakeSocket.all).toHaveLength(1);

    const other = new LiveClient("ws://x/ws/clusters/9/", {
      state: (s, r) => states.push([s, r]),
      hello: () => undefined,
      view: () => undefined,
      alerts: () => undefined,
    });
    other.start();
    FakeSocket.all[1].drop(4404);
    expect(states.at(-1)).toEqual(["offline", "not-found"]);
    vi.advanceTimersByTime(60_000);
    expect(FakeSocket.all).toHaveLength(2);
  });

  it("retries after 4503 (a service is away) with backoff, saying why", () => {
    client.start();
    FakeSocket.all[0].drop(4503);
    expect(states.at(-1)).toEqual(["reconnecting", "service unavailable"]);
    vi.advanceTimersByTime(2_000);
    expect(FakeSocket.all).toHaveLength(2);
    FakeSocket.all[1].drop(4503);
    expect(states.at(-1)).toEqual(["reconnecting", "service unavailable"]);
    vi.advanceTimersByTime(20_000);
    expect(FakeSocket.all.length).toBeGreaterThanOrEqual(3);
  });

  it("pings, and drops a silent connection", () => {
    client.start();
    const s = FakeSocket.all[0];
    s.open();
    s.receive(HELLO);
    vi.advanceTimersByTime(15_000);
    expect(s.sent).toContainEqual({ action: "ping" });
    vi.advanceTimersByTime(45_000); // no message at all for 60 s
    expect(client.state).toBe("reconnecting");
    vi.advanceTimersByTime(1_100);
    expect(FakeSocket.all).toHaveLength(2);
  });
});
