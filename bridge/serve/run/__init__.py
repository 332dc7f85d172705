"""One run, whatever the client: the loop of model turns and server tools, the request body
each turn sends (history, the reasoning scope), what the run adds to the conversation, the
approvals it answers."""
