import { describe, expect, it } from "vitest";

import { formatAge } from "./statusbar";

describe("formatAge", () => {
  it("shows tenths of a second while fresh, then seconds, minutes, hours", () => {
    expect(formatAge(0)).toBe("0.0 s");
    expect(formatAge(420)).toBe("0.4 s");
    expect(formatAge(9_940)).toBe("9.9 s");
    expect(formatAge(12_400)).toBe("12 s");
    expect(formatAge(185_000)).toBe("3 min");
    expect(formatAge(7_300_000)).toBe("2 h");
  });
  it("shows a dash when there is no frame yet", () => {
    expect(formatAge(null)).toBe("—");
    expect(formatAge(Number.NaN)).toBe("—");
    expect(formatAge(-5)).toBe("—");
  });
});
