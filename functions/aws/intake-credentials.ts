import type { LambdaContext } from "hono/aws-lambda";
import type { RotatingIntakeCredentials } from "./secrets.ts";

/**
 * An HTTP handler that, when it answered 401, re-reads the intake's secrets and answers the same
 * event once more if one of them changed: the first batch signed with a rotated secret is
 * accepted, not refused. The event is the whole request (Lambda buffers the body), so answering
 * it twice reads nothing twice; a refused batch was neither enqueued nor remembered as seen.
 *
 * Caveats: the first answer's refusal is still counted (`kubefn_intake_rejected_total`).
 */
export function answeringAgainAfterRotation<E, R>(
  http: (event: E, context: LambdaContext) => Promise<R>,
  credentials: RotatingIntakeCredentials,
): (event: E, context: LambdaContext) => Promise<R> {
  return async (event, context) => {
    const answer = await http(event, context);
    if (statusOf(answer) !== 401 || !(await credentials.refresh())) return answer;
    return http(event, context);
  };
}

const statusOf = (answer: unknown): unknown =>
  typeof answer === "object" && answer !== null ? (answer as { statusCode?: unknown }).statusCode : undefined;
