/**
 * The scenario form as a pure model, built from GET /api/scenarios/kinds/: default
 * texts for the inputs, parsing and checking what the user typed into the `params`
 * object POST /api/scenarios/ takes, and mapping DRF's per-field errors
 * (`{"params.sizes[2]": ["must be > 0 bytes, got 0"]}`) back onto the fields.
 *
 * The server validates everything again (`prepare` of the kind); the checks here
 * only spare a round trip for what the kinds description already says (types,
 * required, min/max, choices).
 */
import type { KindChart, KindField as ApiKindField, ScenarioKind } from "../api";
import { parseCardRef } from "./format";

export type RawChoice = string | number | boolean | null | [unknown, unknown] | { value: unknown; label?: unknown };

/**
 * A field as the form reads it: the server's KindField (GET /api/scenarios/kinds/,
 * types generated from the schema), of which only `name` and `type` are needed;
 * choices may also come as [value, label] pairs or {value, label} objects.
 * `type` is choice, choice_list (several of the choices), integer, number, boolean,
 * string, integer_list, card, card_list, integer_pairs or object (JSON text); a type this
 * form does not know is read as JSON if it parses, else as text.
 */
export type KindField = Pick<ApiKindField, "name" | "type"> &
  Partial<Omit<ApiKindField, "name" | "type" | "choices">> & { choices?: ReadonlyArray<RawChoice> | null };

/**
 * Which rows of the result to plot: `result[series][i][x]` against `[y]` (the
 * server's KindChart; `log_y` for a kind that wants a log y axis).
 */
export type ChartHint = Pick<KindChart, "x" | "y"> & Partial<KindChart> & { log_y?: boolean };

/** A kind as the form reads it; the server's ScenarioKind is one. */
export type KindInfo = Pick<ScenarioKind, "name"> &
  Partial<Pick<ScenarioKind, "label" | "description">> & { fields: KindField[]; chart?: ChartHint | null };

export interface ChoiceOption {
  value: unknown;
  text: string; // the <option value>
  label: string;
}

/** Choices as (value, option text, label), whatever form the API gives them in. */
export function choiceOptions(field: KindField): ChoiceOption[] {
  const out: ChoiceOption[] = [];
  for (const c of field.choices ?? []) {
    let value: unknown;
    let label: unknown;
    if (Array.isArray(c)) [value, label] = c;
    else if (c !== null && typeof c === "object") ({ value, label } = c);
    else value = c;
    out.push({
      value,
      text: plain(value),
      label: label === undefined || label === null ? plain(value) : plain(label),
    });
  }
  return out;
}

/** The text an input starts with: the default, lists comma-separated, nothing for null. */
export function defaultText(field: KindField): string {
  const d = field.default;
  if (d === undefined || d === null) return "";
  if (field.type === "object") return Array.isArray(d) && d.length === 0 ? "" : JSON.stringify(d);
  if (Array.isArray(d)) {
    return d.map((v) => (Array.isArray(v) ? v.map(plain).join("-") : plain(v))).join(", ");
  }
  return plain(d);
}

/** A value as text: primitives as String() writes them, objects as JSON. */
function plain(value: unknown): string {
  return typeof value === "object" && value !== null ? JSON.stringify(value) : String(value);
}

/** Whether a boolean field starts checked. */
export function defaultChecked(field: KindField): boolean {
  return field.default === true || field.default === "true";
}

export type RawValue = string | boolean;

export type Parsed = { ok: true; value: unknown; omit: boolean } | { ok: false; error: string };

function bounds(field: KindField, n: number, what = ""): string | null {
  if (typeof field.min === "number" && n < field.min) return `${what}must be ≥ ${field.min}, got ${n}`;
  if (typeof field.max === "number" && n > field.max) return `${what}must be ≤ ${field.max}, got ${n}`;
  return null;
}

/** "1_048_576" or "1 048 576" → "1048576" (group separators people type). */
function ungroup(text: string): string {
  return text.replace(/[_\u00a0\u202f]/g, "");
}

function parseInteger(text: string): number | null {
  const t = ungroup(text.trim());
  if (!/^[+-]?(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?$/i.test(t)) return null;
  const n = Number(t);
  return Number.isSafeInteger(n) ? n : null;
}

/** Comma- (or space-) separated integers: "1024, 4096 65536" → [1024, 4096, 65536]. */
export function parseIntegerList(
  text: string,
): { ok: true; value: number[] } | { ok: false; error: string; index: number } {
  const parts = text.split(/[,;\s]+/).filter((p) => p !== "");
  const out: number[] = [];
  for (let i = 0; i < parts.length; i++) {
    const n = parseInteger(parts[i]);
    if (n === null) return { ok: false, error: `item ${i + 1} (${parts[i]}) is not a whole number`, index: i };
    out.push(n);
  }
  return { ok: true, value: out };
}

/**
 * Pairs of integers however they are typed: "1-2, 3-4", "1:2 3:4", "[[1, 2], [3, 4]]"
 * → [[1, 2], [3, 4]] (the integers in order, taken two by two).
 */
export function parseIntegerPairs(
  text: string,
): { ok: true; value: [number, number][] } | { ok: false; error: string } {
  const junk = text.replace(/[\d\s,;:\-[\]()]/g, "");
  if (junk !== "") return { ok: false, error: `only numbers in pairs like "1-2, 3-4", got ${JSON.stringify(junk)}` };
  const numbers = (text.match(/\d+/g) ?? []).map(Number);
  if (numbers.length % 2) return { ok: false, error: `pairs of numbers, got an odd count (${numbers.length})` };
  const out: [number, number][] = [];
  for (let i = 0; i < numbers.length; i += 2) out.push([numbers[i], numbers[i + 1]]);
  return { ok: true, value: out };
}

/** Card ids or serials separated by commas or spaces: "12, SN-3" → [12, "SN-3"]. */
export function parseCardList(text: string): (number | string)[] {
  return text
    .split(/[,;\s]+/)
    .map(parseCardRef)
    .filter((v): v is number | string => v !== null);
}

/**
 * One input's raw value → the JSON value to send. `omit` when it is empty and not
 * required (the server applies its default).
 */
export function parseField(field: KindField, raw: RawValue): Parsed {
  if (field.type === "boolean") {
    const v = typeof raw === "boolean" ? raw : raw === "true" || raw === "on";
    return { ok: true, value: v, omit: false };
  }
  const text = typeof raw === "string" ? raw.trim() : String(raw);
  if (text === "") {
    return field.required ? { ok: false, error: "this field is required" } : { ok: true, value: undefined, omit: true };
  }
  switch (field.type) {
    case "integer": {
      const n = parseInteger(text);
      if (n === null) return { ok: false, error: `a whole number, got ${JSON.stringify(text)}` };
      const b = bounds(field, n);
      return b ? { ok: false, error: b } : { ok: true, value: n, omit: false };
    }
    case "number": {
      const n = Number(ungroup(text));
      if (!Number.isFinite(n)) return { ok: false, error: `a number, got ${JSON.stringify(text)}` };
      const b = bounds(field, n);
      return b ? { ok: false, error: b } : { ok: true, value: n, omit: false };
    }
    case "integer_list": {
      const list = parseIntegerList(text);
      if (!list.ok) return { ok: false, error: list.error };
      if (list.value.length === 0) {
        return field.required
          ? { ok: false, error: "this field is required" }
          : { ok: true, value: undefined, omit: true };
      }
      for (let i = 0; i < list.value.length; i++) {
        const b = bounds(field, list.value[i], `item ${i + 1} `);
        if (b) return { ok: false, error: b };
      }
      return { ok: true, value: list.value, omit: false };
    }
    case "card":
      return { ok: true, value: parseCardRef(text), omit: false };
    case "card_list": {
      const cards = parseCardList(text);
      if (cards.length === 0) {
        return field.required
          ? { ok: false, error: "this field is required" }
          : { ok: true, value: undefined, omit: true };
      }
      return { ok: true, value: cards, omit: false };
    }
    case "integer_pairs": {
      const pairs = parseIntegerPairs(text);
      if (!pairs.ok) return pairs;
      if (pairs.value.length === 0) {
        return field.required
          ? { ok: false, error: "this field is required" }
          : { ok: true, value: undefined, omit: true };
      }
      for (let i = 0; i < pairs.value.length; i++) {
        for (const n of pairs.value[i]) {
          const b = bounds(field, n, `pair ${i + 1} `);
          if (b) return { ok: false, error: b };
        }
      }
      return { ok: true, value: pairs.value, omit: false };
    }
    case "choice": {
      const options = choiceOptions(field);
      const hit = options.find((o) => o.text === text);
      if (options.length && !hit) {
        return { ok: false, error: `one of ${options.map((o) => o.text).join(", ")}` };
      }
      return { ok: true, value: hit ? hit.value : text, omit: false };
    }
    case "choice_list": {
      const options = choiceOptions(field);
      const items = text
        .split(",")
        .map((t) => t.trim())
        .filter((t) => t !== "");
      if (items.length === 0) {
        return field.required
          ? { ok: false, error: "this field is required" }
          : { ok: true, value: undefined, omit: true };
      }
      const values: unknown[] = [];
      for (const item of items) {
        const hit = options.find((o) => o.text === item);
        if (options.length && !hit) {
          return { ok: false, error: `${JSON.stringify(item)} is not one of ${options.map((o) => o.text).join(", ")}` };
        }
        const value = hit ? hit.value : item;
        if (!values.includes(value)) values.push(value);
      }
      return { ok: true, value: values, omit: false };
    }
    case "string":
      return { ok: true, value: text, omit: false };
    case "object": {
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        return { ok: false, error: `a JSON object like {"tp": [1, 2, 4]}, got ${JSON.stringify(text)}` };
      }
      // A field whose default is a list (a facility run's events) takes a JSON list.
      const list = Array.isArray(field.default);
      if (value === null || typeof value !== "object" || Array.isArray(value) !== list) {
        const like = list ? '[{"at_s": 60, "kind": "cdu_trip", "target": "cdu-0"}]' : '{"tp": [1, 2, 4]}';
        return { ok: false, error: `a JSON ${list ? "list" : "object"} like ${like}, got ${JSON.stringify(text)}` };
      }
      return { ok: true, value, omit: false };
    }
    default: {
      // A type this page does not know yet: JSON if it parses, else the text.
      try {
        return { ok: true, value: JSON.parse(text), omit: false };
      } catch {
        return { ok: true, value: text, omit: false };
      }
    }
  }
}

export interface FormResult {
  params: Record<string, unknown>;
  errors: Record<string, string[]>;
  ok: boolean;
}

/** Every field of `kind` parsed from `raw` (by field name) into the params object. */
export function buildParams(kind: KindInfo, raw: Readonly<Record<string, RawValue | undefined>>): FormResult {
  const params: Record<string, unknown> = {};
  const errors: Record<string, string[]> = {};
  for (const field of kind.fields) {
    const value = raw[field.name];
    const parsed = parseField(field, value === undefined ? (field.type === "boolean" ? false : "") : value);
    if (!parsed.ok) errors[field.name] = [parsed.error];
    else if (!parsed.omit) params[field.name] = parsed.value;
  }
  return { params, errors, ok: Object.keys(errors).length === 0 };
}

/** A DRF error key → the form field it names: "params.sizes[2]" → {field: "sizes", index: 2}. */
export function fieldOfErrorKey(key: string): { field: string; index: number | null; rest: string } | null {
  const m = /^params\.([A-Za-z_][A-Za-z0-9_]*)(?:\[(\d+)\])?(.*)$/.exec(key);
  if (!m) return null;
  return { field: m[1], index: m[2] === undefined ? null : Number(m[2]), rest: m[3] ?? "" };
}

/** Flatten DRF error bodies (flat dotted keys, or nested dicts/lists) to key → messages. */
export function flattenErrors(body: unknown, prefix = ""): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  const add = (key: string, msg: string) => {
    (out[key] ??= []).push(msg);
  };
  const walk = (value: unknown, key: string) => {
    if (value === null || value === undefined) return;
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") {
      add(key, String(value));
    } else if (Array.isArray(value)) {
      value.forEach((item, i) => {
        if (item !== null && typeof item === "object") walk(item, `${key}[${i}]`);
        else walk(item, key);
      });
    } else if (typeof value === "object") {
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
        walk(v, key ? `${key}.${k}` : k);
      }
    }
  };
  walk(body, prefix);
  return out;
}

const GENERAL_LABELS: Readonly<Record<string, string>> = {
  non_field_errors: "",
  detail: "",
  "": "",
  kind: "kind: ",
  cluster: "cluster: ",
  params: "parameters: ",
};

export interface MappedErrors {
  fields: Record<string, string[]>;
  general: string[];
}

/**
 * DRF's 400 body → messages per form field (names in `fieldNames`, plus "kind")
 * and general ones (cluster, non-field errors, fields the form does not show).
 */
export function mapErrors(body: unknown, fieldNames: ReadonlyArray<string>): MappedErrors {
  const known = new Set(fieldNames);
  const fields: Record<string, string[]> = {};
  const general: string[] = [];
  for (const [key, messages] of Object.entries(flattenErrors(body))) {
    const hit = fieldOfErrorKey(key) ?? (known.has(key) ? { field: key, index: null, rest: "" } : null);
    if (hit && known.has(hit.field)) {
      const prefix = (hit.index !== null ? `item ${hit.index + 1}` : "") + hit.rest;
      for (const m of messages) (fields[hit.field] ??= []).push(prefix ? `${prefix}: ${m}` : m);
      continue;
    }
    const label = key in GENERAL_LABELS ? GENERAL_LABELS[key] : `${key.replace(/^params\./, "")}: `;
    for (const m of messages) general.push(`${label}${m}`);
  }
  return { fields, general };
}
