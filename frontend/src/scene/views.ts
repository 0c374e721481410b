/**
 * The three views the scene shows, one level of detail each: the cluster's
 * floor (one instance per rack), a supernode (one per card) and a rack (one
 * per card, with its servers, devices and power bar).
 */
import type { FloorView } from "./floor";
import type { RackView } from "./rack";
import type { SupernodeView } from "./supernode";

export type AnyView = FloorView | SupernodeView | RackView;
