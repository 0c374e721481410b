/**
 * The dashboard's view of the REST API: the client (client.ts) and the types
 * of its answers, generated from the server's OpenAPI schema (types.ts).
 */
export * from "./client";
export type * from "./types";
