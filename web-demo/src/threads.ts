// The threads the bridge keeps for this page (`--threads`; `agui-bridge demo` keeps them in
// memory): listed for the thread list, forgotten, and a run cancelled by the Stop button. The
// paths are the agent's own (/agent/threads, /agent/runs/{runId}/cancel), each request with the
// page's Authorization header: a thread belongs to the token that made it.

import { describeHttpError, isRecord } from "./http_errors";

/** One thread of `GET /threads`. */
export interface ThreadSummary {
  id: string;
  /** From its first user message; empty when that had no text. */
  title: string;
  /** ISO 8601. */
  updatedAt: string;
  /** The run going on in it, if one is. */
  running: string | null;
}

/** The bridge refused a thread request (its message and code, for the banner). */
export class ThreadsError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly status: number,
  ) {
    super(message);
  }
}

export class Threads {
  private readonly base: string;

  constructor(
    agentUrl: string,
    private readonly headers: Record<string, string>,
  ) {
    this.base = agentUrl.endsWith("/") ? agentUrl : `${agentUrl}/`;
  }

  /** The owner's threads, newest first. */
  async list(): Promise<ThreadSummary[]> {
    const body = await this.request("GET", "threads");
    const listed = isRecord(body) && Array.isArray(body.threads) ? body.threads : [];
    return listed.filter(isSummary);
  }

  /** Forgets a thread (a run going on in it ends). */
  async forget(threadId: string): Promise<void> {
    await this.request("DELETE", `threads/${encodeURIComponent(threadId)}`);
  }

  /**
   * Asks the bridge to end a run: it cancels the model's request and ends the run with
   * `RUN_FINISHED` (outcome cancelled), the partial answer kept. False when it would not: the
   * run had ended (409) or is not one it knows (404).
   */
  async cancel(runId: string): Promise<boolean> {
    try {
      await this.request("POST", `runs/${encodeURIComponent(runId)}/cancel`);
      return true;
    } catch (error) {
      if (error instanceof ThreadsError && (error.status === 404 || error.status === 409)) {
        return false;
      }
      throw error;
    }
  }

  private async request(method: string, path: string): Promise<unknown> {
    const response = await fetch(new URL(path, this.base), {
      method,
      headers: { Accept: "application/json", ...this.headers },
    });
    const body: unknown = await response.json().catch(() => undefined);
    if (!response.ok) {
      const { message, code } = describeHttpError(response.status, body);
      throw new ThreadsError(message, code, response.status);
    }
    return body;
  }
}

function isSummary(value: unknown): value is ThreadSummary {
  return (
    isRecord(value) &&
    typeof value.id === "string" &&
    typeof value.title === "string" &&
    typeof value.updatedAt === "string" &&
    (value.running === null || typeof value.running === "string")
  );
}
