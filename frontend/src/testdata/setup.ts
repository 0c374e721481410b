/**
 * Vitest setup: the server's constants as the dashboard page would carry them
 * (config.json, kept equal to twin/web/config.py by tests/web/test_config.py).
 */
import { installConfig } from "../config";
import config from "./config.json";

installConfig(config);
