import { describe, expect, it } from "vitest";

import { failureEvent } from "./contextmenu";

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
