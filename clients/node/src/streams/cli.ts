#!/usr/bin/env node
/** The `sandbox-persist-streams` bin (see cli_main.ts). */
import { main } from './cli_main.js'

main().then(
  (code) => {
    if (code !== undefined) process.exitCode = code
  },
  (error: unknown) => {
    console.error(`sandbox-persist-streams: ${error instanceof Error ? error.message : String(error)}`)
    process.exitCode = 1
  },
)
