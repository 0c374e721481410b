import { describe, expect, it } from "vitest";

import { CODE_CATEGORY, CODE_NO_DATA, categoriesScale, compile } from "../colour";
import { JOB_RGB, allreduceText, cardCategories, categoryValues, isJobColouring, placementText } from "./jobs";

const alloc = {
  card: [10, 11, 12, 20, 20],
  job: [1, 1, 1, 2, 3],
  jobs: [
    { id: 1, name: "llama", tenant: "alpha" },
    { id: 2, name: "bert", tenant: "beta" },
    { id: 3, name: "tiny", tenant: "alpha" },
  ],
};

describe("card categories", () => {
  it("gives each job a category and each of its cards that category", () => {
    const cats = cardCategories(alloc, "job");
    expect(cats.names).toEqual(["llama #1", "bert #2", "tiny #3"]);
    expect([...cats.byCard]).toEqual([
      [10, 1],
      [11, 1],
      [12, 1],
      [20, 2], // a shared card takes its first job's category
    ]);
  });

  it("groups by tenant", () => {
    const cats = cardCategories(alloc, "tenant");
    expect(cats.names).toEqual(["alpha", "beta"]);
    expect(cats.byCard.get(12)).toBe(1);
    expect(cats.byCard.get(20)).toBe(2);
  });

  it("keeps only the highlighted job's cards", () => {
    const cats = cardCategories(alloc, "job", 3);
    expect(cats.names).toEqual(["tiny #3"]);
    expect([...cats.byCard.keys()]).toEqual([20]);
  });

  it("maps shown cards to values, free cards to NaN", () => {
    const values = categoryValues([12, 99, 20], cardCategories(alloc, "job"));
    expect(values[0]).toBe(1);
    expect(values[1]).toBeNaN();
    expect(values[2]).toBe(2);
  });

  it("compiles a palette whose codes are the job colours, cycled, free cards no-data", () => {
    const names = Array.from({ length: JOB_RGB.length + 2 }, (_, i) => `j${i}`);
    const palette = compile(categoriesScale({ key: "job", label: "Job", unit: "" }, names, JOB_RGB));
    expect(palette.code(1)).toBe(CODE_CATEGORY + 1);
    expect(palette.code(Number.NaN)).toBe(CODE_NO_DATA);
    expect(palette.code(names.length + 1)).toBe(CODE_NO_DATA);
    expect(palette.hex[CODE_CATEGORY + 1]).toBe("#4c8dff");
    expect(palette.hex[CODE_CATEGORY + JOB_RGB.length + 1]).toBe(palette.hex[CODE_CATEGORY + 1]);
  });

  it("knows its colour-by keys", () => {
    expect(isJobColouring("job") && isJobColouring("tenant")).toBe(true);
    expect(isJobColouring("gpu_util")).toBe(false);
  });
});

describe("placement texts", () => {
  const q = {
    cards: 16,
    servers: 2,
    racks: 1,
    supernodes: 1,
    rail_aligned: true,
    single_server: false,
    allreduce_s: 0.00499,
    allreduce_algorithm: "ring",
    allreduce_bytes: 1 << 30,
    compact_allreduce_s: 0.00499,
    vs_compact: 1,
    allreduce_note: "",
  };

  it("says what a placement spans and whether it is rail-aligned", () => {
    expect(placementText({ placement: q, state: "running", share_milli: 1000 })).toBe(
      "2 servers · 1 supernode · rail-aligned",
    );
    expect(placementText({ placement: { ...q, rail_aligned: false }, state: "running", share_milli: 1000 })).toBe(
      "2 servers · 1 supernode · not rail-aligned",
    );
    expect(placementText({ placement: null, state: "queued", share_milli: 1000 })).toBe("waiting");
    expect(placementText({ placement: q, state: "running", share_milli: 250 })).toBe("250 ‰ of a card");
  });

  it("gives the predicted AllReduce in ms against the compact placement", () => {
    expect(allreduceText({ placement: q })).toBe("4.99 ms (1.00× compact)");
    expect(allreduceText({ placement: { ...q, allreduce_s: 0.0312, vs_compact: 1.5 } })).toBe(
      "31.2 ms (1.50× compact)",
    );
    expect(allreduceText({ placement: { ...q, allreduce_s: null, allreduce_note: "one card: no collective" } })).toBe(
      "one card: no collective",
    );
  });
});
