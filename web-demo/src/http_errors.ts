// What the bridge says when it refuses a request: {"error": {"code", "message"}}, read for the
// banner. Shared by the runs (chat.ts), the capabilities (main.ts) and the threads (threads.ts).

/** A readable message and a machine code for an HTTP error answer of the bridge. */
export function describeHttpError(
  status: number,
  body: unknown,
): { message: string; code: string } {
  const detail = isRecord(body) && isRecord(body.error) ? body.error : {};
  let message = typeof detail.message === "string" ? detail.message : `HTTP ${status}`;
  if (status === 401) message += ". Open this page as /#token=<the bridge's token>.";
  return { message, code: typeof detail.code === "string" ? detail.code : `http_${status}` };
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
