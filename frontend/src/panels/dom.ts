/**
 * Tiny DOM helpers for the panels. Everything is built with createElement and
 * textContent (never innerHTML with data), so names typed into the admin cannot
 * inject markup.
 */
import { ApiError } from "../api";

export type Child = Node | string | null | undefined | false;

/** createElement with attributes and children; strings become text nodes. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | undefined> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== undefined) el.setAttribute(name, value);
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return el;
}

/** A <button type=button> with a click handler. */
export function button(
  label: string,
  attrs: Record<string, string | undefined>,
  onClick: (ev: MouseEvent) => void,
): HTMLButtonElement {
  const b = h("button", { type: "button", ...attrs }, label);
  b.addEventListener("click", onClick);
  return b;
}

/** A definition list from [term, value] pairs (values may be nodes). */
export function dl(rows: ReadonlyArray<readonly [string, Child]>, cls = "kv"): HTMLElement {
  const list = h("dl", { class: cls });
  for (const [term, value] of rows) {
    list.append(h("dt", {}, term), h("dd", {}, value === null || value === undefined || value === false ? "—" : value));
  }
  return list;
}

/** What to tell the user about a failed request (never thrown further). */
export function explain(error: unknown): string {
  if (error instanceof ApiError) {
    if (error.status === 401) return "Not logged in (or the session expired): log in again.";
    if (error.status === 403) return "You do not have permission to see this.";
    if (error.status === 404) return "Not found: it may have been deleted or rebuilt.";
    return error.message;
  }
  if (error instanceof Error) return error.message;
  return String(error);
}

/** A `#rrggbb`-free status chip: the colour comes from CSS (`.chip.status-<value>`). */
export function chip(value: string | null | undefined, prefix = "status"): HTMLElement {
  const text = value ?? "—";
  return h("span", { class: `chip ${prefix}-${text.replace(/[^a-z0-9_-]/gi, "")}` }, text);
}
