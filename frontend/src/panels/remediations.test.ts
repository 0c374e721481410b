import { describe, expect, it } from "vitest";

import {
  describeJobs,
  formatDuration,
  mergeRemediations,
  stateCounts,
  type ProposalJob,
  type RemediationPayload,
} from "./remediations";

function job(extra: Partial<ProposalJob> = {}): ProposalJob {
  return {
    job: 7,
    name: "train",
    action: "spare",
    spare: { card: 42, serial: "SN-42", server: 3, slot: 2, scope: "supernode", rail_aligned: true },
    restart_point: "checkpoint",
    lost_work_s: 300,
    restore_s: 125,
    lost_card_hours: 0.94,
    ...extra,
  };
}

function rem(id: number, extra: Partial<RemediationPayload> = {}): RemediationPayload {
  return {
    id,
    card: id * 10,
    cause: "xid79",
    detail: "XID 79",
    state: "proposed",
    message: "",
    detected_at: "2026-01-01T00:00:00Z",
    decided_at: null,
    applied_via: "",
    proposal: { summary: "move 1 job(s) to spare cards", jobs: [job()], applicable: true },
    ...extra,
  };
}

describe("mergeRemediations", () => {
  it("keeps the newest first and lets a later payload of an id win", () => {
    const out = mergeRemediations([rem(1), rem(2)], [rem(1, { state: "applied" }), rem(3)]);
    expect(out.map((r) => r.id)).toEqual([3, 2, 1]);
    expect(out[2].state).toBe("applied");
  });
  it("caps the list and ignores payloads without an id", () => {
    const bad = { state: "applied" } as unknown as RemediationPayload;
    expect(mergeRemediations([rem(1), rem(2), rem(3)], [bad], 2).map((r) => r.id)).toEqual([3, 2]);
  });
});

describe("describeJobs", () => {
  it("says where each job goes and what it loses", () => {
    expect(describeJobs(rem(1))).toEqual([
      "train #7 → card SN-42 (same supernode, same rail); restart from checkpoint, loses 5.0 min + 2.1 min restore",
    ]);
    const server = job({ spare: { ...job().spare!, scope: "server", rail_aligned: false } });
    expect(describeJobs(rem(1, { proposal: { summary: "", jobs: [server], applicable: true } }))[0]).toContain(
      "(same server)",
    );
  });
  it("says when no spare exists and when a job is re-routed", () => {
    const none = job({ action: "none", spare: null, note: "no free card", restore_s: 600 });
    const route = job({ action: "reroute", spare: null });
    const lines = describeJobs(rem(1, { proposal: { summary: "", jobs: [none, route], applicable: false } }));
    expect(lines[0]).toBe(
      "train #7: no spare (no free card); restart from checkpoint, loses 5.0 min + 10.0 min restore",
    );
    expect(lines[1]).toBe("train #7: re-routed, no restart");
  });
  it("copes with an empty or malformed proposal", () => {
    expect(describeJobs(rem(1, { proposal: {} }))).toEqual([]);
  });
});

describe("formatDuration and stateCounts", () => {
  it("formats seconds, minutes and hours", () => {
    expect([formatDuration(42), formatDuration(300), formatDuration(7200), formatDuration(Number.NaN)]).toEqual([
      "42 s",
      "5.0 min",
      "2.0 h",
      "—",
    ]);
  });
  it("counts per state", () => {
    expect(stateCounts([rem(1), rem(2, { state: "applied" }), rem(3)])).toEqual({ proposed: 2, applied: 1 });
  });
});
