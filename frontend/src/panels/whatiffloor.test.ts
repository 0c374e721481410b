import { describe, expect, it } from "vitest";

import { DIVERGING, gradientAt, hex } from "../colour";
import { differenceSpan, rackDifferences } from "./whatiffloor";

describe("rackDifferences", () => {
  it("maps each rack id to its peak kW difference, skipping non-numbers", () => {
    const m = rackDifferences({ racks: { ids: [4, 5, 6], peak_kw_difference: [-12.5, 0, null] } });
    expect([...m!.entries()]).toEqual([
      [4, -12.5],
      [5, 0],
    ]);
  });

  it("answers null without racks or with mismatched lists", () => {
    expect(rackDifferences({})).toBeNull();
    expect(rackDifferences({ racks: { ids: [1, 2], peak_kw_difference: [1] } })).toBeNull();
    expect(rackDifferences({ racks: { ids: [], peak_kw_difference: [] } })).toBeNull();
  });
});

describe("differenceSpan", () => {
  it("is the largest |difference| rounded up, so that 0 sits at the middle", () => {
    expect(
      differenceSpan(
        new Map([
          [1, -37],
          [2, 12],
        ]),
      ),
    ).toBe(40);
    expect(differenceSpan(new Map([[1, 0]]))).toBe(0.1); // nothing changed: still a scale
  });
});

describe("the diverging scale", () => {
  it("paints 0 grey, a fall blue and a rise red", () => {
    expect(hex(gradientAt(DIVERGING, 0.5))).toBe("#6e7681");
    expect(hex(gradientAt(DIVERGING, 0))).toBe("#4c8dff");
    expect(hex(gradientAt(DIVERGING, 1))).toBe("#da3633");
  });
});
