// CopilotKit's runtime reports usage to CopilotKit unless COPILOTKIT_TELEMETRY_DISABLED is set.
// This example keeps it off unless you set that variable yourself (COPILOTKIT_TELEMETRY_DISABLED=false
// turns it on). server.mjs imports this module first: the runtime reads the variable as it loads.
process.env.COPILOTKIT_TELEMETRY_DISABLED ??= "true";
