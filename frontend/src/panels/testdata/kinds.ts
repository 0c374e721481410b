/**
 * GET /api/scenarios/kinds/ as the API answered it (route, failure, collective),
 * for the form-model tests. Regenerate from twin.scenarios.kinds.describe_kinds().
 */
import type { KindInfo } from "../scenarioform";

export const KINDS: KindInfo[] = [
  {
    "name": "route",
    "label": "Route between two cards",
    "description": "Fewest-hop or lowest-latency path with its hops, latency and bottleneck.",
    "fields": [
      {
        "name": "src",
        "type": "card",
        "label": "From",
        "help": "Card id or serial (a card number without a cluster).",
        "required": true,
        "default": null,
        "choices": null,
        "min": null,
        "max": null,
        "needs_cluster": false,
        "advanced": false
      },
      {
        "name": "dst",
        "type": "card",
        "label": "To",
        "help": "Card id or serial (a card number without a cluster).",
        "required": true,
        "default": null,
        "choices": null,
        "min": null,
        "max": null,
        "needs_cluster": false,
        "advanced": false
      },
      {
        "name": "by",
        "type": "choice",
        "label": "Minimise",
        "help": "Fewest hops or lowest latency.",
        "required": false,
        "default": "hops",
        "choices": [
          "hops",
          "latency"
        ],
        "min": null,
        "max": null,
        "needs_cluster": false,
        "advanced": false
      }
    ],
    "chart": null
  },
  {
    "name": "failure",
    "label": "Failure impact",
    "description": "Remove links, cards or switches; connectivity and what got worse.",
    "fields": [
      {
        "name": "links",
        "type": "integer_list",
        "label": "Links",
        "help": "Simulation link numbers to remove.",
        "required": false,
        "default": [],
        "choices": null,
        "min": 0,
        "max": null,
        "needs_cluster": false,
        "advanced": true
      },
      {
        "name": "link_pairs",
        "type": "integer_pairs",
        "label": "Link pairs",
        "help": "Links to remove, each as the [a, b] simulation node numbers of its ends.",
        "required": false,
        "default": [],
        "choices": null,
        "min": 0,
        "max": null,
        "needs_cluster": false,
        "advanced": true
      },
      {
        "name": "nodes",
        "type": "integer_list",
        "label": "Nodes",
        "help": "Simulation node numbers (cards first) to remove.",
        "required": false,
        "default": [],
        "choices": null,
        "min": 0,
        "max": null,
        "needs_cluster": false,
        "advanced": true
      },
      {
        "name": "random_links",
        "type": "integer",
        "label": "Random links",
        "help": "How many more links to remove at random.",
        "required": false,
        "default": 0,
        "choices": null,
        "min": 0,
        "max": null,
        "needs_cluster": false,
        "advanced": false
      },
      {
        "name": "random_cards",
        "type": "integer",
        "label": "Random cards",
        "help": "How many more cards to remove at random.",
        "required": false,
        "default": 0,
        "choices": null,
        "min": 0,
        "max": null,
        "needs_cluster": false,
        "advanced": false
      },
      {
        "name": "random_switches",
        "type": "integer",
        "label": "Random switches",
        "help": "How many more switches (PCIe, NIC, leaf, spine, core) to remove at random.",
        "required": false,
        "default": 0,
        "choices": null,
        "min": 0,
        "max": null,
        "needs_cluster": false,
        "advanced": false
      },
      {
        "name": "seed",
        "type": "integer",
        "label": "Seed",
        "help": "Random seed of the picks and the sampling.",
        "required": false,
        "default": 0,
        "choices": null,
        "min": 0,
        "max": null,
        "needs_cluster": false,
        "advanced": false
      },
      {
        "name": "samples",
        "type": "integer",
        "label": "Samples",
        "help": "Source cards sampled when a metric cannot be computed exactly.",
        "required": false,
        "default": 32,
        "choices": null,
        "min": 2,
        "max": null,
        "needs_cluster": false,
        "advanced": false
      },
      {
        "name": "cards",
        "type": "card_list",
        "label": "Cards",
        "help": "Cards to fail, by id or serial.",
        "required": false,
        "default": [],
        "choices": null,
        "min": null,
        "max": null,
        "needs_cluster": true,
        "advanced": false
      },
      {
        "name": "live",
        "type": "boolean",
        "label": "Live failures",
        "help": "Also fail the cards whose status is failed and the scale-up links that are down.",
        "required": false,
        "default": false,
        "choices": null,
        "min": null,
        "max": null,
        "needs_cluster": true,
        "advanced": false
      }
    ],
    "chart": null
  },
  {
    "name": "collective",
    "label": "Collective cost",
    "description": "Time, algbw and busbw per message size; the best algorithm per size.",
    "fields": [
      {
        "name": "op",
        "type": "choice",
        "label": "Operation",
        "help": "The collective to price.",
        "required": true,
        "default": null,
        "choices": [
          "allreduce",
          "reduce_scatter",
          "allgather",
          "alltoall",
          "broadcast"
        ],
        "min": null,
        "max": null,
        "needs_cluster": false,
        "advanced": false
      },
      {
        "name": "algorithm",
        "type": "choice",
        "label": "Algorithm",
        "help": "auto: the best supported one per size.",
        "required": false,
        "default": "auto",
        "choices": [
          "auto",
          "ring",
          "tree",
          "rhd",
          "torus",
          "hierarchical"
        ],
        "min": null,
        "max": null,
        "needs_cluster": false,
        "advanced": false
      },
      {
        "name": "ranks",
        "type": "integer",
        "label": "Ranks",
        "help": "Cards taking part (empty: every card; more than one supernode: whole supernodes).",
        "required": false,
        "default": null,
        "choices": null,
        "min": 2,
        "max": null,
        "needs_cluster": false,
        "advanced": false
      },
      {
        "name": "sizes",
        "type": "integer_list",
        "label": "Message sizes (bytes)",
        "help": "One point per size.",
        "required": false,
        "default": [
          1024,
          4096,
          16384,
          65536,
          262144,
          1048576,
          4194304,
          16777216,
          67108864,
          268435456,
          1073741824
        ],
        "choices": null,
        "min": 1,
        "max": 1125899906842624,
        "needs_cluster": false,
        "advanced": false
      },
      {
        "name": "compression",
        "type": "number",
        "label": "Compression ratio",
        "help": "Bytes on the wire divided by this (4 = 4:1).",
        "required": false,
        "default": 1.0,
        "choices": null,
        "min": 1,
        "max": null,
        "needs_cluster": false,
        "advanced": false
      },
      {
        "name": "overhead_ns",
        "type": "number",
        "label": "Overhead per message (ns)",
        "help": "Software cost added to every step.",
        "required": false,
        "default": 0.0,
        "choices": null,
        "min": 0,
        "max": null,
        "needs_cluster": false,
        "advanced": false
      },
      {
        "name": "reduce_gbps",
        "type": "number",
        "label": "Reduction throughput (Gb/s)",
        "help": "Must be > 0; empty: reductions are free.",
        "required": false,
        "default": null,
        "choices": null,
        "min": 0,
        "max": null,
        "needs_cluster": false,
        "advanced": false
      }
    ],
    "chart": {
      "series": "sizes",
      "x": "size_bytes",
      "y": "busbw_gbps",
      "log_x": true,
      "x_label": "Message size (bytes)",
      "y_label": "Bus bandwidth (Gb/s)"
    }
  }
];
