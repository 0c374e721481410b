import { describe, expect, it } from "vitest";

import { clusterOf, frameLabel, nextFrame, playbackPolicies, racksOf, rackShares } from "./playback";

const result = {
  nodes: { source: "cluster", cluster: { id: 7, name: "demo" } },
  racks: { ids: [10, 20, 30], cards: [8, 16, 0] },
  policies: [
    {
      policy: "fgd",
      rack_timeline: {
        axis: "time_s",
        t: [0, 50, 100],
        allocated: [
          [0, 0, 0],
          [4, 16, 0],
          [8, 20, 0],
        ],
      },
    },
    { policy: "random", rack_timeline: null },
    {
      policy: "best-fit",
      rack_timeline: {
        axis: "arrivals",
        t: [0, 12],
        allocated: [
          [2, 0, 0],
          [8, 8, 0],
        ],
      },
    },
  ],
};

describe("scheduling playback", () => {
  it("lists the policies that carry a timeline, and the run's cluster and racks", () => {
    expect(playbackPolicies(result).map((p) => p.policy)).toEqual(["fgd", "best-fit"]);
    expect(clusterOf(result)).toBe(7);
    expect(clusterOf({ nodes: { source: "uniform" } })).toBeNull();
    expect(racksOf({ policies: [] })).toBeNull();
    expect(playbackPolicies({ ...result, racks: null })).toEqual([]);
  });

  it("gives each rack its allocated share at a point, clamped, racks without cards left out", () => {
    const [fgd] = playbackPolicies(result);
    expect([...rackShares(result.racks, fgd.timeline, 0)]).toEqual([
      [10, 0],
      [20, 0],
    ]);
    expect([...rackShares(result.racks, fgd.timeline, 1)]).toEqual([
      [10, 0.5],
      [20, 1],
    ]);
    // 20 of 16 (rounding in the server's sums) is shown as full; a point past the end is the last
    expect(rackShares(result.racks, fgd.timeline, 9).get(20)).toBe(1);
  });

  it("labels a frame by time or arrivals with the cluster-wide share", () => {
    const [fgd, best] = playbackPolicies(result);
    expect(frameLabel(result.racks, fgd.timeline, 1)).toBe("t = 50 s: 83.3 % of the cards allocated");
    expect(frameLabel(result.racks, best.timeline, 1)).toBe("after 12 arrivals: 66.7 % of the cards allocated");
  });

  it("plays to the last point and stops", () => {
    expect(nextFrame(0, 3)).toBe(1);
    expect(nextFrame(1, 3)).toBe(2);
    expect(nextFrame(2, 3)).toBeNull();
  });
});
