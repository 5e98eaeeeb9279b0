/**
 * The one binding the Worker entry takes from "cloudflare:sockets", typed as the socket prober's
 * port (workers-types declares this module only in its global build, which the Node-side
 * typecheck does not load).
 */
declare module "cloudflare:sockets" {
  export const connect: import("../../shared/health/socket-prober.ts").SocketConnect;
}
