"""Built-in plugins: tools that sit above the API and use the run machinery as any plugin would
(`registry.discover` imports each package here as it imports the benchmarks and backends).
`auto_steer`: auto-STEER with the user's models (`econeval steer write | check | review |
generate | contamination`). Nothing in `benchmarks/` imports a plugin."""
