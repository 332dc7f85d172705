"""The model server: the pooled client and its transport, the SSE chunks it reads, and the
recording of every exchange (``serve --record``)."""
