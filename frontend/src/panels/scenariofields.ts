/**
 * The scenario form's inputs, built from a kind's description (GET
 * /api/scenarios/kinds/): a select for a choice (a multiple select for a
 * choice_list), a checkbox for a boolean, a
 * text input for the rest (numbers and lists are parsed by scenarioform.ts).
 */
import { h } from "./dom";
import { choiceOptions, defaultChecked, defaultText, type KindField, type KindInfo } from "./scenarioform";

export type Input = HTMLInputElement | HTMLSelectElement;

/** One field's input and the line that shows its error. */
export interface FieldInput {
  field: KindField;
  input: Input;
  error: HTMLElement;
}

/** An input's raw value for `parseField`: a checkbox's state, a multiple select's
 *  chosen options comma-separated, else its text. */
export function rawValue(input: Input): string | boolean {
  if (input instanceof HTMLInputElement && input.type === "checkbox") return input.checked;
  if (input instanceof HTMLSelectElement && input.multiple) {
    return Array.from(input.selectedOptions, (o) => o.value).join(",");
  }
  return input.value;
}

/** Hints in the empty text inputs of the list and card types. */
const PLACEHOLDERS: Record<string, string> = {
  integer_list: "comma-separated, e.g. 1024, 65536, 1048576",
  card: "card id or serial",
  card_list: "card ids or serials, comma-separated",
  integer_pairs: "pairs, e.g. 0-1, 5-6",
  object: 'JSON, e.g. {"tp": [1, 2, 4, 8]}',
  object_list: 'JSON list, e.g. [{"at_s": 600, "kind": "fail_rack", "target": 3}]',
};

/**
 * Build the inputs of `kind`'s fields into `fieldsBox` (node and link numbers
 * under "Advanced") and its description; returns each field's input and error
 * line by field name.
 */
export function renderFields(
  kind: KindInfo | undefined,
  fieldsBox: HTMLElement,
  description: HTMLElement,
): Map<string, FieldInput> {
  const inputs = new Map<string, FieldInput>();
  fieldsBox.replaceChildren();
  description.textContent = kind?.description ?? "";
  if (!kind) return inputs;
  const advanced = h(
    "details",
    { class: "tw-advanced" },
    h("summary", {}, "Advanced: simulation node and link numbers"),
  );
  for (const field of kind.fields) {
    const id = `tw-scenario-${kind.name}-${field.name}`;
    let input: Input;
    if (field.type === "choice") {
      const select = h("select", { id, name: field.name });
      if (!field.required && (field.default === null || field.default === undefined))
        select.append(h("option", { value: "" }, "—"));
      for (const o of choiceOptions(field)) select.append(h("option", { value: o.text }, o.label));
      select.value = defaultText(field);
      // A required choice without a default starts on its first choice.
      if (select.selectedIndex < 0 && select.options.length) select.selectedIndex = 0;
      input = select;
    } else if (field.type === "choice_list") {
      const options = choiceOptions(field);
      const chosen = new Set(
        defaultText(field)
          .split(",")
          .map((t) => t.trim()),
      );
      const select = h("select", { id, name: field.name, multiple: "", size: String(Math.min(options.length, 6)) });
      for (const o of options) {
        const option = h("option", { value: o.text }, o.label);
        option.selected = chosen.has(o.text);
        select.append(option);
      }
      input = select;
    } else if (field.type === "boolean") {
      input = h("input", { id, name: field.name, type: "checkbox" });
      input.checked = defaultChecked(field);
    } else {
      const numeric = field.type === "integer" || field.type === "number";
      input = h("input", {
        id,
        name: field.name,
        type: "text",
        autocomplete: "off",
        spellcheck: "false",
        inputmode: field.type === "integer" ? "numeric" : field.type === "number" ? "decimal" : undefined,
        placeholder:
          PLACEHOLDERS[field.type] ??
          (numeric && (typeof field.min === "number" || typeof field.max === "number")
            ? `${field.min ?? ""}…${field.max ?? ""}`
            : ""),
      });
      input.value = defaultText(field);
    }
    input.setAttribute("data-testid", `scenario-field-${field.name}`);
    input.dataset.type = field.type;
    if (field.required) input.required = true;
    const error = h("span", { class: "tw-field-error", "data-testid": `scenario-field-error-${field.name}` });
    const label = h(
      "label",
      { class: `tw-field type-${field.type}`, for: id },
      h("span", {}, field.label ?? field.name, field.required ? " *" : ""),
      input,
      field.help ? h("small", { class: "tw-help" }, field.help) : null,
      error,
    );
    (field.advanced ? advanced : fieldsBox).append(label);
    inputs.set(field.name, { field, input, error });
  }
  if (advanced.childElementCount > 1) fieldsBox.append(advanced);
  return inputs;
}
