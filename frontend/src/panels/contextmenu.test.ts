import { describe, expect, it } from "vitest";

import { failureEvent, markerFailure } from "./contextmenu";

describe("failureEvent", () => {
  it("fails a rack or a card at the fork, by its id", () => {
    expect(failureEvent("rack", 17)).toEqual({ at_s: 0, kind: "fail_rack", target: 17 });
    expect(failureEvent("card", 4095)).toEqual({ at_s: 0, kind: "fail_card", target: 4095 });
  });

  it("has no single event for a supernode or a link", () => {
    expect(failureEvent("supernode", 1)).toBeNull();
    expect(failureEvent("link", 1)).toBeNull();
  });
});

describe("markerFailure", () => {
  it("fails a switch by its id and trips a CDU by its key, at the fork", () => {
    expect(markerFailure({ kind: "switch", id: 42 })).toEqual({ at_s: 0, kind: "fail_switch", target: 42 });
    expect(markerFailure({ kind: "cdu", key: "cdu-3" })).toEqual({ at_s: 0, kind: "cdu_trip", target: "cdu-3" });
  });
});
