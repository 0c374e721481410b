import { describe, expect, it } from "vitest";

import { shareValues } from "./paint";

describe("playback colouring", () => {
  it("gives each instance its share in percent, NaN (no data) where the frame has none", () => {
    const values = shareValues(
      [10, 20, 30],
      new Map([
        [10, 0.5],
        [30, 1],
      ]),
    );
    expect(Array.from(values.slice(0, 1))).toEqual([50]);
    expect(Number.isNaN(values[1])).toBe(true);
    expect(values[2]).toBe(100);
  });
});
