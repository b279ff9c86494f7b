// A client author's flow against the Renga operator API, with a client generated from
// openapi.yaml (openapi-typescript) and called with openapi-fetch. Run by the Go test next to it
// against a live server (RENGA_URL, RENGA_OPERATOR_TOKEN); it exits non-zero on the first
// surprise.
import { randomUUID } from "node:crypto";
import createClient from "openapi-fetch";
import type { components, paths } from "./api.js";

type Problem = components["schemas"]["Problem"];

const baseUrl = process.env.RENGA_URL;
const token = process.env.RENGA_OPERATOR_TOKEN;
if (!baseUrl || !token) {
  throw new Error("set RENGA_URL and RENGA_OPERATOR_TOKEN");
}

const renga = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });

function check(cond: boolean, what: string | (() => string)): asserts cond {
  if (!cond) {
    throw new Error(`unexpected: ${typeof what === "string" ? what : what()}`);
  }
}

// problemOf describes whatever came back in place of the expected answer.
function problemOf(r: { response: Response; error?: unknown }): string {
  return `${r.response.status} ${JSON.stringify(r.error)}`;
}

// describe turns a problem into a sentence. The codes are an open set (x-extensible-enum): a
// code this client was generated without is handled by its HTTP status, never a crash.
export function describe(p: Problem): string {
  switch (p.error) {
    case "slug_taken":
      return "that slug is taken";
    case "version_mismatch":
      return `someone else changed it (now version ${p.current_version ?? "?"})`;
    case "idempotency_key_reused":
      return "that Idempotency-Key was used for another request";
    default:
      return `${p.status} ${p.title} (${p.error}), request ${p.request_id}`;
  }
}

async function main(): Promise<void> {
  // 1. A keyed create, and its replay: same body, marked as replayed.
  const slug = `ts-${randomUUID().slice(0, 8)}`;
  const key = randomUUID();
  const body = { slug, display_name: "TypeScript client" };
  const created = await renga.POST("/api/v1/operator/organizations", { params: { header: { "Idempotency-Key": key } }, body });
  check(created.response.status === 201 && created.data !== undefined, () => `create: ${problemOf(created)}`);
  const org = created.data;
  check(created.response.headers.get("X-Request-Id")?.startsWith("req_") === true, "X-Request-Id on the create");
  const replay = await renga.POST("/api/v1/operator/organizations", { params: { header: { "Idempotency-Key": key } }, body });
  check(replay.response.status === 201 && replay.data?.id === org.id, "the replay answers the same organization");
  check(replay.response.headers.get("Idempotent-Replayed") === "true", "the replay says it is one");

  // The same key with another request is refused, with a code the client can act on.
  const reused = await renga.POST("/api/v1/operator/organizations", {
    params: { header: { "Idempotency-Key": key } },
    body: { slug: `${slug}-other`, display_name: "Other" },
  });
  check(reused.response.status === 409 && reused.error?.error === "idempotency_key_reused", () => `reused key: ${problemOf(reused)}`);

  // 2. Read the policy, write it back with one change under If-Match.
  const path = { organization_id: org.id };
  const read = await renga.GET("/api/v1/operator/organizations/{organization_id}/policy", { params: { path } });
  check(read.data !== undefined, "read the policy");
  const etag = read.response.headers.get("ETag");
  check(etag !== null, "the policy's ETag");
  const changed = { ...read.data, limits: { ...read.data.limits, max_agents: 25 } };
  const put = await renga.PUT("/api/v1/operator/organizations/{organization_id}/policy", {
    params: { path, header: { "If-Match": etag } },
    body: changed,
  });
  check(put.response.status === 200 && put.data?.limits.max_agents === 25, () => `write-back: ${problemOf(put)}`);

  // 3. A stale version: 412 with the current version, then recover with it.
  const stale = await renga.PUT("/api/v1/operator/organizations/{organization_id}/policy", {
    params: { path, header: { "If-Match": etag } },
    body: { limits: { max_agents: 30 } },
  });
  check(stale.response.status === 412 && stale.error !== undefined, "a stale If-Match is a 412");
  const current = stale.error.current_version;
  check(typeof current === "number", () => `412 carries current_version: ${describe(stale.error)}`);
  const retried = await renga.PUT("/api/v1/operator/organizations/{organization_id}/policy", {
    params: { path, header: { "If-Match": `"${current}"` } },
    body: { limits: { max_agents: 30 } },
  });
  check(retried.response.status === 200 && retried.data?.limits.max_agents === 30, "the retry with current_version");

  // 4. Page through the organizations, two at a time.
  const seen = new Set<string>();
  let pageToken: string | undefined;
  let pages = 0;
  do {
    const page = await renga.GET("/api/v1/operator/organizations", { params: { query: { page_size: 2, page_token: pageToken } } });
    check(page.data !== undefined, () => `list: ${problemOf(page)}`);
    for (const o of page.data.items) {
      check(!seen.has(o.id), `organization ${o.id} listed twice`);
      seen.add(o.id);
    }
    pageToken = page.data.next_page_token ?? undefined;
    pages++;
  } while (pageToken !== undefined);
  check(seen.has(org.id), "the new organization is in the list");
  check(pages >= 2 || seen.size <= 2, "more than one page when there is more than one page");

  // 5. A code this client does not know is still a problem it can describe.
  const unknown: Problem = { type: "about:blank", title: "Newer", status: 409, error: "a_code_from_a_later_release", request_id: "req_x" };
  check(describe(unknown).includes("a_code_from_a_later_release"), "an unknown code is described by its status");

  console.log(`ok: ${seen.size} organizations over ${pages} pages`);
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
