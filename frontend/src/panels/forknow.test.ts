import { describe, expect, it } from "vitest";

import { forkLabel, forkRequest } from "./forknow";

const FINAL = ["succeeded", "failed", "cancelled"];

describe("forkRequest", () => {
  it("asks for a what-if that freezes the live state now, with no events", () => {
    expect(forkRequest(7)).toEqual({ kind: "whatif", cluster: 7, params: { events: [] }, fork: true });
  });
});

describe("forkLabel", () => {
  it("shows the run's progress while it goes, and the plain label when it is over", () => {
    expect(forkLabel(null, FINAL)).toBe("Fork now");
    expect(forkLabel({ status: "queued", progress: 0 }, FINAL)).toBe("Forking… queued");
    expect(forkLabel({ status: "running", progress: 0.426 }, FINAL)).toBe("Forking… 43 %");
    expect(forkLabel({ status: "running", progress: null }, FINAL)).toBe("Forking… 0 %");
    expect(forkLabel({ status: "running", progress: 7 }, FINAL)).toBe("Forking… 100 %");
    expect(forkLabel({ status: "succeeded", progress: 1 }, FINAL)).toBe("Fork now");
  });
});
