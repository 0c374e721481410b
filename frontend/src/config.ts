/**
 * Constants the server owns (twin/web/config.py): the dashboard page carries
 * them as the JSON script #twin-config, so the browser code never keeps its
 * own copy of a budget, a close code or a list of metrics.
 *
 * The unit tests run without a page: src/testdata/setup.ts installs
 * src/testdata/config.json, which tests/web/test_config.py keeps equal to what
 * the server renders.
 */

export interface TwinConfig {
  /** Budget of a rack created without one (W). */
  rack_budget_default_w: number;
  /** ws/clusters/<id>/ close codes: after the first two reconnecting cannot help;
   * `unavailable` (a service is away) is retried with backoff. */
  close_codes: { unauthenticated: number; not_found: number; unavailable: number };
  /** Metrics with a per-card history (the card panel's sparkline). */
  history_metrics: string[];
  /** Scenario run states that never change again. */
  scenario_final_statuses: string[];
}

let current: TwinConfig | null = null;

/** Use `config` instead of the page's (the unit tests' setup). */
export function installConfig(config: TwinConfig): void {
  current = config;
}

/** The server's constants, read from the page once. */
export function config(): TwinConfig {
  if (current) return current;
  const el = typeof document === "undefined" ? null : document.getElementById("twin-config");
  if (!el?.textContent) {
    throw new Error("the page has no #twin-config: it must be the dashboard Django renders (twin/web)");
  }
  current = JSON.parse(el.textContent) as TwinConfig;
  return current;
}
