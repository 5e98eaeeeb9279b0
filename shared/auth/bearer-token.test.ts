import { describe, expect, it } from "vitest";
import { bearerToken } from "./index.ts";

describe("bearerToken (the one Authorization parser of intake and the crawler API)", () => {
  it.each<[string | undefined, string | undefined]>([
    ["Bearer abc123", "abc123"],
    ["bearer abc123", "abc123"],
    ["Bearer\tabc123 ", "abc123"],
    ["Bearer  abc123", "abc123"],
    ["Bearer", undefined],
    ["Bearer ", undefined],
    ["Bearer a b", undefined],
    ["Basic YWxhZGRpbjpvcGVuc2VzYW1l", undefined],
    ["Bearerabc", undefined],
    ["", undefined],
    [undefined, undefined],
  ])("%j → %j", (header, token) => expect(bearerToken(header)).toBe(token));
});
