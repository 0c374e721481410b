import { describe, expect, it } from "vitest";

import {
  buildParams,
  choiceOptions,
  defaultChecked,
  defaultText,
  fieldOfErrorKey,
  flattenErrors,
  mapErrors,
  parseCardList,
  parseField,
  parseIntegerList,
  parseIntegerPairs,
  type KindField,
  type KindInfo,
} from "./scenarioform";
import KINDS from "./testdata/kinds.json";

const kind = (name: string): KindInfo => {
  const k = KINDS.find((x) => x.name === name);
  if (!k) throw new Error(name);
  return k;
};
const field = (k: string, name: string): KindField => {
  const f = kind(k).fields.find((x) => x.name === name);
  if (!f) throw new Error(name);
  return f;
};

describe("a facility run's events (an object field whose default is a list)", () => {
  it("takes a JSON list and refuses an object", () => {
    const events = field("facility", "events");
    expect(defaultText(events)).toBe("");
    const list = '[{"at_s": 60, "kind": "cdu_trip", "target": "cdu-0"}]';
    const value: unknown = JSON.parse(list);
    expect(parseField(events, list)).toEqual({ ok: true, value, omit: false });
    const refused = parseField(events, '{"at_s": 60}');
    expect(refused.ok).toBe(false);
    expect(parseField(field("training_search", "limits"), "[1]").ok).toBe(false);
  });
});

describe("defaults from the kinds description", () => {
  it("writes list defaults comma-separated and null as empty", () => {
    expect(defaultText(field("collective", "sizes"))).toBe(
      "1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864, 268435456, 1073741824",
    );
    expect(defaultText(field("collective", "ranks"))).toBe("");
    expect(defaultText(field("collective", "algorithm"))).toBe("auto");
    expect(defaultText(field("collective", "compression"))).toBe("1");
    expect(defaultText(field("failure", "links"))).toBe("");
    expect(
      defaultText({
        name: "p",
        type: "integer_pairs",
        default: [
          [1, 2],
          [3, 4],
        ],
      }),
    ).toBe("1-2, 3-4");
  });
  it("reads booleans and choices", () => {
    expect(defaultChecked(field("failure", "live"))).toBe(false);
    expect(defaultChecked({ name: "x", type: "boolean", default: true })).toBe(true);
    expect(choiceOptions(field("route", "by")).map((o) => o.text)).toEqual(["hops", "latency"]);
    expect(
      choiceOptions({ name: "c", type: "choice", choices: [["a", "Alpha"], { value: 2, label: "Two" }, "z"] }),
    ).toEqual([
      { value: "a", text: "a", label: "Alpha" },
      { value: 2, text: "2", label: "Two" },
      { value: "z", text: "z", label: "z" },
    ]);
  });
});

describe("parsing inputs", () => {
  it("parses integer lists with commas, spaces and group separators", () => {
    expect(parseIntegerList("1024, 4096 65536;1_048_576")).toEqual({ ok: true, value: [1024, 4096, 65536, 1048576] });
    expect(parseIntegerList("1e3, 2")).toEqual({ ok: true, value: [1000, 2] });
    const bad = parseIntegerList("1024, 4k");
    expect(bad.ok).toBe(false);
    if (!bad.ok) {
      expect(bad.index).toBe(1);
      expect(bad.error).toContain("item 2");
    }
    expect(parseIntegerList("1.5").ok).toBe(false);
  });
  it("checks bounds of each list element", () => {
    const sizes = field("collective", "sizes");
    expect(parseField(sizes, "1024, 0")).toEqual({ ok: false, error: "item 2 must be ≥ 1, got 0" });
    expect(parseField(sizes, "")).toEqual({ ok: true, value: undefined, omit: true });
  });
  it("parses integers and numbers with their bounds", () => {
    const ranks = field("collective", "ranks");
    expect(parseField(ranks, "64")).toEqual({ ok: true, value: 64, omit: false });
    expect(parseField(ranks, "1")).toEqual({ ok: false, error: "must be ≥ 2, got 1" });
    expect(parseField(ranks, "3.5").ok).toBe(false);
    expect(parseField(ranks, "  ")).toEqual({ ok: true, value: undefined, omit: true });
    const compression = field("collective", "compression");
    expect(parseField(compression, "2.5")).toEqual({ ok: true, value: 2.5, omit: false });
    expect(parseField(compression, "abc").ok).toBe(false);
    expect(parseField(compression, "0.5")).toEqual({ ok: false, error: "must be ≥ 1, got 0.5" });
  });
  it("parses cards as ids or serials", () => {
    const src = field("route", "src");
    expect(parseField(src, "17")).toEqual({ ok: true, value: 17, omit: false });
    expect(parseField(src, "SN-00017")).toEqual({ ok: true, value: "SN-00017", omit: false });
    expect(parseField(src, "")).toEqual({ ok: false, error: "this field is required" });
    expect(parseCardList("12, SN-3  7")).toEqual([12, "SN-3", 7]);
    expect(parseField(field("failure", "cards"), "12, SN-3")).toEqual({ ok: true, value: [12, "SN-3"], omit: false });
  });
  it("parses pairs however they are typed", () => {
    expect(parseIntegerPairs("0-1, 5-6")).toEqual({
      ok: true,
      value: [
        [0, 1],
        [5, 6],
      ],
    });
    expect(parseIntegerPairs("[[0, 1], [5, 6]]")).toEqual({
      ok: true,
      value: [
        [0, 1],
        [5, 6],
      ],
    });
    expect(parseIntegerPairs("0:1 5:6")).toEqual({
      ok: true,
      value: [
        [0, 1],
        [5, 6],
      ],
    });
    expect(parseIntegerPairs("0-1, 5").ok).toBe(false);
    expect(parseIntegerPairs("a-b").ok).toBe(false);
  });
  it("checks choices and reads booleans", () => {
    const op = field("collective", "op");
    expect(parseField(op, "allreduce")).toEqual({ ok: true, value: "allreduce", omit: false });
    expect(parseField(op, "allsum").ok).toBe(false);
    expect(parseField(op, "")).toEqual({ ok: false, error: "this field is required" });
    expect(parseField(field("failure", "live"), true)).toEqual({ ok: true, value: true, omit: false });
  });
  it("reads several choices (the scheduling policies), comma-separated, once each", () => {
    const policies = field("scheduling", "policies");
    expect(policies.type).toBe("choice_list");
    expect(defaultText(policies)).toBe("fgd, best-fit, topology-aware");
    expect(parseField(policies, "fgd,random, fgd")).toEqual({ ok: true, value: ["fgd", "random"], omit: false });
    const bad = parseField(policies, "fgd,magic");
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.error).toContain('"magic" is not one of');
    expect(parseField(policies, " , ")).toEqual({ ok: true, value: undefined, omit: true });
  });
});

describe("buildParams", () => {
  it("builds the params object of a collective, leaving empty optional fields out", () => {
    const built = buildParams(kind("collective"), {
      op: "allreduce",
      algorithm: "auto",
      ranks: "",
      sizes: "1024, 1048576",
      compression: "1",
      overhead_ns: "0",
      reduce_gbps: "",
    });
    expect(built.ok).toBe(true);
    expect(built.params).toEqual({
      op: "allreduce",
      algorithm: "auto",
      sizes: [1024, 1048576],
      compression: 1,
      overhead_ns: 0,
    });
  });
  it("collects an error per bad field", () => {
    const built = buildParams(kind("route"), { src: "", dst: "SN-1", by: "fastest" });
    expect(built.ok).toBe(false);
    expect(Object.keys(built.errors).sort()).toEqual(["by", "src"]);
    expect(built.params).toEqual({ dst: "SN-1" });
  });
  it("treats missing inputs as empty (booleans as unchecked)", () => {
    const built = buildParams(kind("failure"), {});
    expect(built.ok).toBe(true);
    expect(built.params).toEqual({ live: false });
  });
});

describe("DRF errors onto the form", () => {
  it("reads dotted keys with indexes", () => {
    expect(fieldOfErrorKey("params.sizes[2]")).toEqual({ field: "sizes", index: 2, rest: "" });
    expect(fieldOfErrorKey("params.src")).toEqual({ field: "src", index: null, rest: "" });
    expect(fieldOfErrorKey("params.supernodes[0].fabric.dims")).toEqual({
      field: "supernodes",
      index: 0,
      rest: ".fabric.dims",
    });
    expect(fieldOfErrorKey("cluster")).toBeNull();
  });
  it("flattens nested bodies", () => {
    expect(flattenErrors({ params: { sizes: ["bad"] }, kind: ["unknown kind 'x'"], list: [{ a: ["e"] }] })).toEqual({
      "params.sizes": ["bad"],
      kind: ["unknown kind 'x'"],
      "list[0].a": ["e"],
    });
    expect(flattenErrors({ detail: "Authentication credentials were not provided." })).toEqual({
      detail: ["Authentication credentials were not provided."],
    });
  });
  it("maps field errors to fields and the rest to general messages", () => {
    const names = [...kind("collective").fields.map((f) => f.name), "kind"];
    const mapped = mapErrors(
      {
        "params.sizes[2]": ["must be > 0 bytes, got 0"],
        "params.ranks": ["100 ranks but the topology has only 64 cards"],
        cluster: ["cannot be simulated"],
        "params.dims[0]": ["every dimension must be ≥ 2, got 1"],
        non_field_errors: ["something else"],
      },
      names,
    );
    expect(mapped.fields).toEqual({
      sizes: ["item 3: must be > 0 bytes, got 0"],
      ranks: ["100 ranks but the topology has only 64 cards"],
    });
    expect(mapped.general).toEqual([
      "cluster: cannot be simulated",
      "dims[0]: every dimension must be ≥ 2, got 1",
      "something else",
    ]);
  });
  it("maps a bad kind onto the kind select", () => {
    expect(mapErrors({ kind: ["unknown kind 'x'"] }, ["kind"]).fields).toEqual({ kind: ["unknown kind 'x'"] });
  });
});

describe("the what-if form", () => {
  it("takes its events as a JSON list; empty, the server's default (none) applies", () => {
    const events = kind("whatif").fields.find((f) => f.name === "events") as KindField;
    expect(events.type).toBe("object_list");
    expect(defaultText(events)).toBe("");
    expect(parseField(events, "")).toEqual({ ok: true, value: undefined, omit: true });
    const text = '[{"at_s": 600, "kind": "fail_rack", "target": 3}]';
    expect(parseField(events, text)).toEqual({
      ok: true,
      value: [{ at_s: 600, kind: "fail_rack", target: 3 }],
      omit: false,
    });
  });
});
