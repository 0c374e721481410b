import { describe, expect, it } from "vitest";

import {
  formatAgo,
  formatBytes,
  formatGbps,
  formatMetric,
  formatNs,
  formatNumber,
  formatSeconds,
  parseCardRef,
  routeSummary,
} from "./format";

describe("formatNumber", () => {
  it("keeps three significant figures and drops trailing zeros", () => {
    expect(formatNumber(71.46)).toBe("71.5");
    expect(formatNumber(71.5)).toBe("71.5");
    expect(formatNumber(0.12345)).toBe("0.123");
    expect(formatNumber(655)).toBe("655");
  });
  it("groups thousands and rounds large values", () => {
    expect(formatNumber(1234.6)).toBe("1,235");
    expect(formatNumber(1048576)).toBe("1,048,576");
    expect(formatNumber(1234.5678, 4)).toBe("1,235");
    expect(formatNumber(999.96)).toBe("1,000");
  });
  it("says — for missing values", () => {
    expect(formatNumber(null)).toBe("—");
    expect(formatNumber(undefined)).toBe("—");
    expect(formatNumber(Number.NaN)).toBe("—");
  });
  it("writes tiny values in exponent form and zero as 0", () => {
    expect(formatNumber(0)).toBe("0");
    expect(formatNumber(0.00001234)).toBe("1.23e-5");
  });
});

describe("formatMetric", () => {
  it("adds the unit", () => {
    expect(formatMetric(71.46, "°C")).toBe("71.5 °C");
    expect(formatMetric(655, "W")).toBe("655 W");
    expect(formatMetric(97.25, "%")).toBe("97.3 %");
  });
  it("leaves bare units out", () => {
    expect(formatMetric(3, "count")).toBe("3");
    expect(formatMetric(0, "code")).toBe("0");
  });
  it("shows — without a reading", () => {
    expect(formatMetric(null, "W")).toBe("—");
  });
});

describe("units", () => {
  it("formats binary message sizes", () => {
    expect(formatBytes(100)).toBe("100 B");
    expect(formatBytes(1024)).toBe("1 KiB");
    expect(formatBytes(1536)).toBe("1.5 KiB");
    expect(formatBytes(1 << 20)).toBe("1 MiB");
    expect(formatBytes(2 ** 30)).toBe("1 GiB");
  });
  it("formats nanoseconds at every scale", () => {
    expect(formatNs(850)).toBe("850 ns");
    expect(formatNs(1234)).toBe("1,234 ns");
    expect(formatNs(12_500)).toBe("12.5 µs");
    expect(formatNs(3.2e6)).toBe("3.2 ms");
    expect(formatNs(2e9)).toBe("2 s");
  });
  it("formats seconds and bandwidth", () => {
    expect(formatSeconds(0.42)).toBe("420 ms");
    expect(formatSeconds(7.92e-8)).toBe("79.2 ns");
    expect(formatSeconds(1.97208e-5)).toBe("19.7 µs");
    expect(formatSeconds(3.25)).toBe("3.25 s");
    expect(formatSeconds(125)).toBe("2 min 5 s");
    expect(formatGbps(400)).toBe("400 Gb/s");
    expect(formatGbps(1600)).toBe("1.6 Tb/s");
  });
  it("formats ages relative to now", () => {
    const now = Date.parse("2025-01-01T12:00:00Z");
    expect(formatAgo("2025-01-01T11:59:55Z", now)).toBe("5 s ago");
    expect(formatAgo("2025-01-01T11:57:00Z", now)).toBe("3 min ago");
    expect(formatAgo("2025-01-01T10:00:00Z", now)).toBe("2 h ago");
    expect(formatAgo(null, now)).toBe("—");
    expect(formatAgo("garbage", now)).toBe("—");
  });
});

describe("routeSummary", () => {
  it("writes hops, latency and bottleneck", () => {
    expect(routeSummary({ reachable: true, hops: 3, latency_ns: 1234, bottleneck_gbps: 400 })).toBe(
      "3 hops · 1,234 ns · bottleneck 400 Gb/s",
    );
  });
  it("keeps latency in ns with four significant figures", () => {
    expect(routeSummary({ reachable: true, hops: 2, latency_ns: 312.5, bottleneck_gbps: null })).toBe(
      "2 hops · 312.5 ns",
    );
    expect(routeSummary({ reachable: true, hops: 0, latency_ns: 0, bottleneck_gbps: null })).toBe("0 hops · 0 ns");
    expect(routeSummary({ reachable: true, hops: 1, latency_ns: 5, bottleneck_gbps: null })).toBe("1 hop · 5 ns");
  });
  it("says when there is no path", () => {
    expect(routeSummary({ reachable: false, hops: 0, latency_ns: null, bottleneck_gbps: null })).toMatch(
      /^unreachable/,
    );
  });
});

describe("parseCardRef", () => {
  it("reads digits as an id and anything else as a serial", () => {
    expect(parseCardRef(" 42 ")).toBe(42);
    expect(parseCardRef("SN-0001-a")).toBe("SN-0001-a");
    expect(parseCardRef("12a")).toBe("12a");
    expect(parseCardRef("   ")).toBeNull();
  });
});
