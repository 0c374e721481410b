import { describe, expect, it } from "vitest";

import { cellText, jobRows, jobTableNotes, sortRows } from "./schedulingjobs";

const row = { size: 1, queued_s: 0, start_s: 0, nodes: 1, allreduce_s: null };
const result = {
  policies: [
    {
      policy: "fgd",
      job_table: {
        rows: [
          { ...row, job: "a", size: 8, jct_s: 120, end_s: 120, nodes: 2, allreduce_s: 0.0123 },
          { ...row, job: "b", jct_s: null, end_s: null },
        ],
        total: 2,
        shown: "all 2 tasks",
      },
    },
    {
      policy: "best-fit",
      job_table: { rows: [{ ...row, job: "c", jct_s: 30, end_s: 30 }], total: 900, shown: "75 of 900 tasks" },
    },
    { policy: "old", curve: [] },
  ],
};

describe("scheduling job table", () => {
  it("flattens the policies' rows with the policy named, and says what each holds", () => {
    expect(jobRows(result).map((r) => `${r.policy}/${r.job}`)).toEqual(["fgd/a", "fgd/b", "best-fit/c"]);
    expect(jobTableNotes(result)).toEqual(["fgd: all 2 tasks", "best-fit: 75 of 900 tasks"]);
    expect(jobRows(null)).toEqual([]);
  });

  it("sorts numbers numerically either way with empty cells last", () => {
    const rows = jobRows(result);
    expect(sortRows(rows, "jct_s").map((r) => r.job)).toEqual(["c", "a", "b"]);
    expect(sortRows(rows, "jct_s", true).map((r) => r.job)).toEqual(["a", "c", "b"]);
    expect(sortRows(rows, "policy").map((r) => r.job)).toEqual(["c", "a", "b"]);
    expect(sortRows(rows, "size", true)[0].job).toBe("a");
  });

  it("writes AllReduce in ms and empty cells as a dash", () => {
    const [a, b] = jobRows(result);
    expect(cellText(a, "allreduce_s")).toBe("12.3");
    expect(cellText(b, "jct_s")).toBe("—");
    expect(cellText(a, "jct_s")).toBe("120");
  });
});
