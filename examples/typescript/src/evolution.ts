// A client meets a newer server: the values of a response's enumerations are open sets
// (x-extensible-enum), so a server of a later release may answer a value this client was
// generated without: a new organization state, a new error code. The client type-checks
// against its own spec and against the newer one, and handles such a value instead of failing.
// Run by the Go test next to it against a server answering a later release's values (RENGA_URL,
// RENGA_OPERATOR_TOKEN, RENGA_ORGANIZATION_ID); it exits non-zero on the first surprise.
import createClient from "openapi-fetch";
import type { components, paths } from "./api.js";

type Organization = components["schemas"]["Organization"];
type Problem = components["schemas"]["Problem"];

// describeState says what an organization's state means to this client. A state it does not
// know is shown as it is: it is neither active nor gone.
export function describeState(o: Organization): string {
  switch (o.state) {
    case "active":
      return "active";
    case "suspended":
      return `suspended (${o.suspended_reason ?? "no reason given"})`;
    case "deletion_pending":
      return `deletion pending until ${o.purge_after ?? "?"}`;
    case "purging":
    case "moved":
      return `gone (${o.state})`;
    default:
      return `${o.state} (a state this client does not know)`;
  }
}

// describeProblem handles the codes this client acts on, and any other by its HTTP status.
export function describeProblem(p: Problem): string {
  switch (p.error) {
    case "invalid_state":
      return "not in a state that allows it";
    case "suspended":
      return "the organization is suspended";
    default:
      return `${p.status >= 500 ? "try again later" : "refused"}: ${p.title} (${p.error})`;
  }
}

function check(cond: boolean, what: string): asserts cond {
  if (!cond) {
    throw new Error(`unexpected: ${what}`);
  }
}

async function main(): Promise<void> {
  const baseUrl = process.env.RENGA_URL;
  const token = process.env.RENGA_OPERATOR_TOKEN;
  const id = process.env.RENGA_ORGANIZATION_ID;
  if (!baseUrl || !token || !id) {
    throw new Error("set RENGA_URL, RENGA_OPERATOR_TOKEN and RENGA_ORGANIZATION_ID");
  }
  const renga = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
  const path = { organization_id: id };

  const got = await renga.GET("/api/v1/operator/organizations/{organization_id}", { params: { path } });
  check(got.response.status === 200 && got.data !== undefined, `get: ${got.response.status}`);
  console.log(`state: ${describeState(got.data)}`);

  const suspended = await renga.POST("/api/v1/operator/organizations/{organization_id}/suspend", {
    params: { path, header: { "Idempotency-Key": "evolution-1" } },
    body: { reason: "evolution" },
  });
  check(suspended.error !== undefined, `suspend: ${suspended.response.status}`);
  console.log(`problem: ${describeProblem(suspended.error)}`);
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
