"""What the bridge tells about its runs: each run's observation, and what reads it: Prometheus
metrics, OpenTelemetry traces, the one log line per run."""
